# Prints this rank's whole environment, one "ENV <RANK> NAME=VALUE" line per variable (values
# escaped as Python string literals), and whether torch sees a torchelastic launch.
import os

import torch.distributed as dist

rank = os.environ.get("RANK", "?")
lines = [f"ENV {rank} {name}={os.environ[name]!r}" for name in sorted(os.environ)]
lines.append(f"ELASTIC {rank} {dist.is_torchelastic_launched()}")
print("\n".join(lines), flush=True)
