# Prints every HOROVOD_* and NCCL_* variable this rank was given, as "ENV <rank> NAME=VALUE", for
# comparing what horovodrun and dtrain launch set for the same options.
import os

rank = os.environ.get("HOROVOD_RANK", "?")
for name in sorted(os.environ):
    if name.startswith(("HOROVOD_", "NCCL_")):
        print("ENV", rank, name + "=" + os.environ[name], flush=True)
