# An elastic horovod.torch program (hvd.elastic.run with a TorchState, as Horovod's elastic
# examples) started by `dtrain launch --min-np N`, no horovodrun. Each step trains on data of the
# rank's own and sums a one per rank over all ranks; every line says what the rank saw:
#   hvd-step step=S rank=R size=N count=C t=T      C must equal N: every rank of the round took
#                                                  part; T: time.time() after the step
#   hvd-start rank=R host=H pid=P                  first: Horovod's first rank, its node and
#                                                  process (a test may stop it)
#   hvd-elastic-done step=S size=N rank=R local=L/LS cross=C/CS same=1|0
#                                                  at the end: the parameters equal on every rank
# The rank HVD_TEST_DIE_RANK (dtrain's RANK, fixed for the job; horovodrun's first HOROVOD_RANK)
# kills itself with SIGKILL at step HVD_TEST_DIE_STEP, and so does the rank on node
# HVD_TEST_DIE_HOST; HVD_TEST_STEP_S sleeps after each step, so a test can act in between.
# Once the file HVD_TEST_STOP_FILE exists (the nodes see the launching machine's files), the
# ranks end after the first step in which one of them saw it, all at the same step (the flag
# goes through the step's allreduce), before HVD_TEST_STEPS: a test ends the job as soon as it
# saw what it waits for.
import os
import signal
import socket
import time

import torch
import horovod.torch as hvd

hvd.init()
print(f"hvd-start rank={hvd.rank()} host={socket.gethostname()} pid={os.getpid()}", flush=True)
me = os.environ.get("RANK") or os.environ.get("HOROVOD_RANK", "")  # the first round's
steps = int(os.environ.get("HVD_TEST_STEPS", "30"))
die_rank = os.environ.get("HVD_TEST_DIE_RANK", "")
die_host = os.environ.get("HVD_TEST_DIE_HOST", "")
die_step = int(os.environ.get("HVD_TEST_DIE_STEP", "10"))
step_s = float(os.environ.get("HVD_TEST_STEP_S", "0.05"))
stop_file = os.environ.get("HVD_TEST_STOP_FILE", "")

torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).double()
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                     named_parameters=model.named_parameters())
state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0, end=steps)


def data(step):
    g = torch.Generator().manual_seed(1000 * step + hvd.rank())
    x = torch.randn(32, 8, generator=g, dtype=torch.float64)
    return x, x.sum(dim=1, keepdim=True)


@hvd.elastic.run
def train(state):
    while state.step < state.end:
        dies = me == die_rank or socket.gethostname() == die_host
        if dies and state.step == die_step:
            print(f"rank {me} kills itself at step {state.step} t={time.time():.3f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = data(state.step)
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        seen = 1.0 if stop_file and os.path.exists(stop_file) else 0.0
        count, stops = hvd.allreduce(torch.tensor([1.0, seen]), op=hvd.Sum, name="count").tolist()
        print(f"hvd-step step={state.step} rank={hvd.rank()} size={hvd.size()} "
              f"count={int(count)} t={time.time():.3f}", flush=True)
        state.step += 1
        if stops > 0:
            state.end = state.step  # every rank of the round saw the same sum: all end here
        state.commit()
        time.sleep(step_s)


train(state)
flat = torch.cat([p.detach().flatten() for p in model.parameters()]).unsqueeze(0)
every = hvd.allgather(flat, name="params")
same = all(torch.equal(every[0], every[i]) for i in range(every.shape[0]))
print(f"hvd-elastic-done step={state.step} size={hvd.size()} rank={hvd.rank()} "
      f"local={hvd.local_rank()}/{hvd.local_size()} cross={hvd.cross_rank()}/{hvd.cross_size()} "
      f"same={int(same)}", flush=True)
