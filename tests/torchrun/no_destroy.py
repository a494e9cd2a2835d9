# Two Gloo ranks that never call destroy_process_group: rank 0 leaves at once after the
# allreduce, rank 1 a moment later. When rank 0 hosts the TCPStore its exit takes the store away
# under rank 1; with the launcher's store (TORCHELASTIC_USE_AGENT_STORE=True) it cannot.
# NO_DESTROY_LATE_SET: rank 1 writes to the store after rank 0 left (fails when rank 0 hosted it).
# Without destroy_process_group a rank can also abort at its own exit ("terminate called without
# an active exception": torch's race at interpreter exit, pytorch/pytorch#190489), under any
# launcher; bench/job_store_aborts.sh counts how often. NO_DESTROY_RANK0_DESTROYS: rank 0 calls
# it after all, for a run that checks the store and not that race.
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
assert t[0].item() == dist.get_world_size()
if dist.get_rank() != 0:
    time.sleep(float(os.environ.get("NO_DESTROY_LINGER", "0")))
    if os.environ.get("NO_DESTROY_LATE_SET"):
        # Rank 0 has left by now: the store must still be there.
        dist.distributed_c10d._get_default_store().set("late", "1")
        print("late set ok", flush=True)
print(f"rank {dist.get_rank()} done", flush=True)
if dist.get_rank() == 0 and os.environ.get("NO_DESTROY_RANK0_DESTROYS"):
    dist.destroy_process_group()
