# A 2-rank Gloo job that profiles itself with torch's CPU profiler and exports its trace to the
# folder dtrain gives every rank (DTRAIN_TRACE_DIR): the two lines a user's script adds.
import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function, schedule

dist.init_process_group("gloo")
rank = dist.get_rank()
w = torch.randn(256, 256)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=4),
             on_trace_ready=lambda p: p.export_chrome_trace(
                 os.path.join(os.environ["DTRAIN_TRACE_DIR"], f"pytorch-rank{rank}.json.gz"))) as p:
    for step in range(5):
        with record_function("train_step"):
            x = torch.randn(64, 256) @ w
            if rank == 1:
                torch.mm(torch.randn(512, 512), torch.randn(512, 512))  # rank 1 straggles
            dist.all_reduce(x)
        p.step()
dist.destroy_process_group()
# torch's race at interpreter exit (pytorch/pytorch#190489: a thread of torch's aborts while
# Python finalizes) is rarer after destroy_process_group but not gone: one rank of this job
# aborted once in a CI run. What is tested here is the timeline, so the job ends without the
# interpreter's finalization, its traces already written.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
