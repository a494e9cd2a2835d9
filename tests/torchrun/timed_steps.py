# Three steps, each under a watchdog timer armed with torch's own FileTimerClient through the
# FIFO the launcher names in TORCHELASTIC_TIMER_FILE (torchrun with TORCHELASTIC_ENABLE_FILE_TIMER=1,
# or dtrain launch). argv: the seconds each step's timer allows; the attempts (counted from 0)
# in which rank 1 hangs in step 1; the seconds a step takes.
import os
import sys
import time

import torch.distributed.elastic.timer as timer

rank = int(os.environ["RANK"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
print("timer file", os.environ["TORCHELASTIC_TIMER_FILE"], flush=True)
for step in range(3):
    with timer.expires(after=float(sys.argv[1]), scope="train_step"):
        if rank == 1 and step == 1 and restart < int(sys.argv[2]):
            time.sleep(600)  # the hung step
        time.sleep(float(sys.argv[3]))
print("rank", rank, "done", flush=True)
