# Lines for torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters: some match
# "apple", "orange" or "a,b" (given as "a,,b"), some do not, on both streams.
#
# Each line goes out in one write(2). torchrun runs the script as `python -u`, so print() writes
# "a,b from", " ", "1", "\n" one by one, and its tail threads, reading the rank's file while it
# grows, copy a line caught half-written as two: "[default1]:a,b from" without its newline, and
# " 1" dropped by the filter. torchrun's own filtered file then differed from run to run.
import os

rank = os.environ["RANK"]


def say(fd, *words):
    os.write(fd, (" ".join(str(w) for w in words) + "\n").encode())


say(1, "apple from", rank)
say(1, "pear from", rank)
say(1, "a,b from", rank)
say(1, "an orange", "and more " * 3, rank)
say(2, "apple on stderr from", rank)
say(2, "plum on stderr from", rank)
