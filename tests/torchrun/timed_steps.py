# Three steps, each under a watchdog timer armed with torch's own FileTimerClient through the
# FIFO the launcher names in TORCHELASTIC_TIMER_FILE (torchrun with TORCHELASTIC_ENABLE_FILE_TIMER=1,
# or dtrain launch). argv: the seconds each step's timer allows; the attempts (counted from 0)
# in which rank 1 hangs in step 1; the seconds a step takes; the steps (3 unless given);
# "allreduce" to end each step in a Gloo all-reduce (so the other ranks wait for a hung one).
# Rank 1 prints when it armed the timer of the step it hangs in; each rank, its steps per second.
import os
import sys
import time

import torch.distributed.elastic.timer as timer

rank = int(os.environ["RANK"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
print("timer file", os.environ["TORCHELASTIC_TIMER_FILE"], flush=True)
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
allreduce = len(sys.argv) > 5 and sys.argv[5] == "allreduce"
if allreduce:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
start = time.time()
for step in range(steps):
    with timer.expires(after=float(sys.argv[1]), scope="train_step"):
        if rank == 1 and step == 1 and restart < int(sys.argv[2]):
            print("hung step armed at %.3f" % time.time(), flush=True)
            time.sleep(600)  # the hung step
        time.sleep(float(sys.argv[3]))
        if allreduce:
            dist.all_reduce(torch.ones(1))
if allreduce:
    dist.destroy_process_group()
print("rank", rank, "done", "%.1f steps/s" % (steps / (time.time() - start)), flush=True)
