# A 2-rank Gloo job that profiles itself with torch's CPU profiler and exports its trace to the
# folder dtrain gives every rank (DTRAIN_TRACE_DIR): the two lines a user's script adds.
import os

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
