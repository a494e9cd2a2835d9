# Lines for torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters: some match
# "apple", "orange" or "a,b" (given as "a,,b"), some do not, on both streams.
import os
import sys

rank = os.environ["RANK"]
print("apple from", rank)
print("pear from", rank)
print("a,b from", rank)
print("an orange", "and more " * 3, rank)
print("apple on stderr from", rank, file=sys.stderr)
print("plum on stderr from", rank, file=sys.stderr)
