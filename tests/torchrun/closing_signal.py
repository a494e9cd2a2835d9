# Says which signal ended it: each rank prints "ready", then waits; on SIGUSR1 or SIGTERM it
# prints "rank R got SIG..." (where a real job would checkpoint) and exits 0. Each line is one
# write, so ranks sharing a console (under torchrun) do not cut each other's lines.
import os
import signal
import sys
import time

rank = os.environ["RANK"]


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def closing(number, _frame):
    say("rank %s got %s" % (rank, signal.Signals(number).name))
    sys.exit(0)


for number in (signal.SIGUSR1, signal.SIGTERM):
    signal.signal(number, closing)
say("rank %s ready" % rank)
time.sleep(120)
say("rank %s was never signalled" % rank)
