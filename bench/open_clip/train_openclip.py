"""OpenCLIP's own training (open_clip_train.main) with the bench's model config registered.

Also times each train_one_epoch call (data loading included, evaluation and start-up not) and
prints `openclip_train_s <seconds>` at the end, the figure the comparison divides samples by.

usage: train_openclip.py MODEL_CONFIG.json [open_clip_train.main flags...]
"""
import sys
import time

import open_clip
import open_clip_train.main as openclip_main
import open_clip_train.train as openclip_train

open_clip.add_model_config(sys.argv[1])
_train_one_epoch = openclip_train.train_one_epoch
seconds = []


def timed_train_one_epoch(*args, **kwargs):
    start = time.perf_counter()
    result = _train_one_epoch(*args, **kwargs)
    seconds.append(time.perf_counter() - start)
    return result


# main.py imported the name before we could wrap it; replace it where main looks it up.
openclip_main.train_one_epoch = timed_train_one_epoch
openclip_main.main(sys.argv[2:])
print(f"openclip_train_s {sum(seconds):.3f}", flush=True)
