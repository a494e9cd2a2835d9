# Rank 1 raises inside a @record main, then prints 200 lines of noise on its way out (atexit),
# so the last lines of its log say nothing about the exception; rank 0 succeeds.
import atexit
import os

from torch.distributed.elastic.multiprocessing.errors import record

RANK = int(os.environ["RANK"])


def noise():
    for i in range(200):
        print(f"shutdown noise {i}", flush=True)


def check_shape(rows):
    if rows != 3:
        raise ValueError(f"expected 3 rows, got {rows} on rank {RANK}")


@record
def main():
    if RANK == 1:
        atexit.register(noise)
        check_shape(4)


main()
