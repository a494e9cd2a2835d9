# Prints this rank's whole environment, one "ENV <RANK> NAME=VALUE" line per variable (values
# escaped as Python string literals), and whether torch sees a torchelastic launch.
import os

import torch.distributed as dist

rank = os.environ.get("RANK", "?")
lines = [f"ENV {rank} {name}={os.environ[name]!r}" for name in sorted(os.environ)]
lines.append(f"ELASTIC {rank} {dist.is_torchelastic_launched()}")
# One write(2), under PIPE_BUF: torchrun's ranks share its stdout, and print()'s text and its
# newline, written apart, let the other rank's lines in between (seen: "ELASTIC 1 TrueENV 0 ...").
os.write(1, ("\n".join(lines) + "\n").encode())
