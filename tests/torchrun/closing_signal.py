# Says which signal ended it: each rank prints "ready", then waits; on SIGUSR1 or SIGTERM it
# prints "rank R got SIG..." (where a real job would checkpoint) and exits 0.
import os
import signal
import sys
import time

rank = os.environ["RANK"]


def closing(number, _frame):
    print("rank", rank, "got", signal.Signals(number).name, flush=True)
    sys.exit(0)


for number in (signal.SIGUSR1, signal.SIGTERM):
    signal.signal(number, closing)
print("rank", rank, "ready", flush=True)
time.sleep(120)
print("rank", rank, "was never signalled", flush=True)
