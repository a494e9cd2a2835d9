# A horovod.torch program started by `dtrain launch` (no horovodrun): hvd.init() through dtrain's
# Gloo rendezvous, then three facts per rank on one line each, which the test checks:
#   hvd-plan rank=R size=S local_rank=L local_size=LS cross_rank=C cross_size=CS iface=I
#   hvd-allreduce exact=1|0        sum of rank-dependent tensors against the sum computed here
#   hvd-train equal_reference=1|0 max_abs_diff=X loss_first=A loss_last=B
# The training check: each rank starts from its own random init and trains on its own data with
# hvd.DistributedOptimizer after hvd.broadcast_parameters; the result must equal, on every rank,
# one process that starts from rank 0's init and takes the gradient of the mean of all ranks'
# losses (what averaging the gradients means).
import os
import sys

import torch
import horovod.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
print(f"hvd-plan rank={rank} size={size} local_rank={hvd.local_rank()} "
      f"local_size={hvd.local_size()} cross_rank={hvd.cross_rank()} "
      f"cross_size={hvd.cross_size()} iface={os.environ.get('HOROVOD_GLOO_IFACE', '')}",
      flush=True)

if os.environ.get("HVD_TEST_DIE_RANK") == str(rank):
    print(f"rank {rank} dies on purpose", flush=True)
    os._exit(3)

base = torch.arange(1000, dtype=torch.float64)
mine = base * (rank + 1) + rank
total = hvd.allreduce(mine, op=hvd.Sum, name="rank_dependent")
expected = sum(base * (q + 1) + q for q in range(size))
print(f"hvd-allreduce exact={int(torch.equal(total, expected))}", flush=True)


def data(q):
    g = torch.Generator().manual_seed(100 + q)
    x = torch.randn(64, 8, generator=g, dtype=torch.float64)
    return x, x @ torch.linspace(-1, 1, 8, dtype=torch.float64).unsqueeze(1) + 0.5


def model_with_init(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 1)).double()


steps, lr = 30, 0.05
model = model_with_init(1000 + rank)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                               named_parameters=model.named_parameters(), op=hvd.Average)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
x, y = data(rank)
losses = []
for _ in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())

reference = model_with_init(1000)
ref_opt = torch.optim.SGD(reference.parameters(), lr=lr)
everyone = [data(q) for q in range(size)]
for _ in range(steps):
    ref_opt.zero_grad()
    (sum(torch.nn.functional.mse_loss(reference(xq), yq) for xq, yq in everyone) / size).backward()
    ref_opt.step()

diff = max((p.detach() - q.detach()).abs().max().item()
           for p, q in zip(model.parameters(), reference.parameters()))
print(f"hvd-train equal_reference={int(diff < 1e-9)} max_abs_diff={diff:.3g} "
      f"loss_first={losses[0]:.6f} loss_last={losses[-1]:.6f}", flush=True)
hvd.shutdown()
sys.exit(0)
