# Two ranks meet through the job's TCPStore (init_process_group, an allreduce) and say so; once
# the file STORE_ROUNDS_GO names exists (at once when unset) they meet again and end. Run by
# tests/job_store_fault_test.cpp, which kills the job's store in between.
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("met", int(t.item()), flush=True)
go = os.environ.get("STORE_ROUNDS_GO")
while go and not os.path.exists(go):
    time.sleep(0.1)
dist.barrier()
dist.destroy_process_group()
print("done", flush=True)
