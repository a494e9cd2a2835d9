# Four ranks of a job whose rank 2's GPU starts the step's all-reduce late, made from the recorded
# H100 trace (rank 0 of tests/fixtures/kineto) with NCCL kernels added to every profiler step on
# stream 21: `dtrain timeline --summary`'s late GPUs and HolisticTraceAnalysis'
# get_potential_stragglers are compared on it (tests/timeline_late_nccl_test.cpp).
#   python3 late_nccl_ranks.py FIXTURE.json.gz OUT_DIR [KERNEL_PREFIX]
#     -> OUT_DIR/rank{0..3}.json.gz
# KERNEL_PREFIX names the kernels: ncclKernel (NCCL before 2.19, the only names HTA 0.5's
# straggler analysis looks for; the default) or ncclDevKernel (NCCL 2.19 and later).
# In each step, on every rank (times from the step's start, in us):
# - the all-reduce, run twice: the first run (5,000) starts 5,000 late on rank 3; the last
#   (30,000) lasts 10,000 give or take 200 and starts 3,000 late on rank 2, 1,500 on rank 1 in
#   the second step only, 10 to 30 on the others;
# - an all-gather (45,000) of 8,000 give or take 20, starting late on ranks 0 and 1: its length
#   differs less between ranks than the all-reduce's, so it is not the one compared;
# - a broadcast (50,000) shorter than 1% of a step (100 to 500) whose length differs most of all,
#   rank 0 late: too short to count;
# - in the last step (which HTA drops), the all-reduce 20,000 late on rank 3.
import copy
import gzip
import json
import os
import sys

from hta_cases import Ids, add_launched, load, steps

STREAM = 21
LENGTH_OFF = {0: 0.0, 1: 40.0, 2: -200.0, 3: 80.0}
GATHER_OFF = {0: 0.0, 1: 10.0, 2: 5.0, 3: 20.0}
BROADCAST = {0: 100.0, 1: 500.0, 2: 300.0, 3: 200.0}


def reduce_late(rank, step, last):
    if last:
        return 20000.0 if rank == 3 else 10.0 * rank
    if rank == 2:
        return 3000.0
    if rank == 1 and step == 1:
        return 1520.0
    return {0: 10.0, 1: 20.0, 3: 30.0}[rank]


def main():
    fixture, out = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) > 3 else "ncclKernel"
    names = {kind: "%s_%s_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)" % (prefix, kind)
             for kind in ("AllReduce", "AllGather", "Broadcast")}
    source = load(fixture)
    os.makedirs(out, exist_ok=True)
    for rank in range(4):
        doc = copy.deepcopy(source)
        doc["distributedInfo"]["rank"] = rank
        doc["distributedInfo"]["world_size"] = 4
        ids = Ids(doc)
        all_steps = steps(doc)
        for i, s in enumerate(all_steps):
            t = s["ts"]
            last = i == len(all_steps) - 1
            add_launched(doc, ids, "kernel", names["AllReduce"], t + 5000.0 + (5000.0 if rank == 3 else 0),
                         6000.0, t + 100.0, stream=STREAM)
            add_launched(doc, ids, "kernel", names["AllReduce"], t + 30000.0 + reduce_late(rank, i, last),
                         10000.0 + LENGTH_OFF[rank], t + 200.0, stream=STREAM)
            add_launched(doc, ids, "kernel", names["AllGather"],
                         t + 45000.0 + (400.0 if rank in (0, 1) else 0.0) + rank,
                         8000.0 + GATHER_OFF[rank], t + 300.0, stream=STREAM)
            add_launched(doc, ids, "kernel", names["Broadcast"],
                         t + 54000.0 + (600.0 if rank == 0 else 0.0), BROADCAST[rank], t + 400.0,
                         stream=STREAM)
        with gzip.open(os.path.join(out, "rank%d.json.gz" % rank), "wt") as f:
            json.dump(doc, f)


if __name__ == "__main__":
    main()
