#!/bin/sh
# What the shared memory cleanup costs on a node (templates/shm_segments.sh): a rank's end over
# SSH and Slurm runs dtrain_shm_remove after its processes are gone, and the doctor's probe (the
# start's check, the health watch) runs dtrain_shm_files where 64 MiB or more of /dev/shm is used.
# With PROCS extra processes running, each mapping a segment of its own (as a job's data-loader
# workers do), REPEAT times each, alternating with an empty sh: a rank's end with no leftover (one
# find), with one 16 MiB leftover of this run (the listing and the removal), with segments other
# processes wrote since the rank started and still hold (the listing, nothing removed), and the
# probe's listing. Prints milliseconds per call and the extra over the empty sh. Run as the user the ranks
# run as; it writes PROCS + 1 small segments into /dev/shm and removes them.
# Usage: bench/shm_cleanup_cost.sh [PROCS] [REPEAT]
set -eu
procs=${1:-200}
repeat=${2:-20}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
tag=dtrain_bench_$$
# The segments first: 1,000 resource trackers unlinking at once queue on /dev/shm's lock.
trap 'rm -f /dev/shm/psm_${tag}_*; kill -9 $(cat "$work/pids" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT

i=0
while [ "$i" -lt "$procs" ]; do
  python3 -c 'import sys, time
from multiprocessing import shared_memory
s = shared_memory.SharedMemory(name=sys.argv[1], create=True, size=1 << 16)
s.buf[:4] = b"busy"
print(flush=True)
time.sleep(600)' "psm_${tag}_$i" >/dev/null 2>&1 &
  echo $! >>"$work/pids"
  i=$((i + 1))
done
while [ "$(ls /dev/shm | grep -c "psm_${tag}_")" -lt "$procs" ]; do sleep 0.2; done
# The rank's start, a second after the segments were written (the removal takes whole seconds).
sleep 1.1
since=$(date +%s)
sleep 1.1

# Microseconds of one run of sh -c SCRIPT (the segment functions sourced).
timed() {
  t0=$(date +%s%N)
  sh -c ". '$here/templates/shm_segments.sh'; $1" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
leftover="/dev/shm/psm_${tag}_left"
empty=0 none=0 one=0 list=0 held=0 n=0
# The four turn by turn, so that a change in the machine's load weighs on each alike.
while [ "$n" -lt "$repeat" ]; do
  empty=$((empty + $(timed :)))
  none=$((none + $(timed "dtrain_shm_remove $since")))
  dd if=/dev/zero of="$leftover" bs=1M count=16 status=none
  one=$((one + $(timed "dtrain_shm_remove $since")))
  [ ! -e "$leftover" ] || { echo "the leftover was not removed" >&2; exit 1; }
  list=$((list + $(timed dtrain_shm_files)))
  # Segments written since the rank started (every one, with 0 as the start) and still held:
  # the listing runs, and nothing is removed.
  held=$((held + $(timed "dtrain_shm_remove 0")))
  n=$((n + 1))
done
held_left=$(ls /dev/shm | grep -c "psm_${tag}_[0-9]") || true
[ "$held_left" = "$procs" ] || { echo "held segments were removed: $held_left of $procs left" >&2; exit 1; }
n=$(ls -d /proc/[0-9]* | wc -l)
awk -v e="$empty" -v a="$none" -v b="$one" -v c="$list" -v h="$held" -v p="$n" -v k="$procs" \
  -v r="$repeat" 'BEGIN {
  e /= 1000 * r; a /= 1000 * r; b /= 1000 * r; c /= 1000 * r; h /= 1000 * r
  printf "%d processes (%d mapping a segment), %d runs each; ms per call, and over an empty sh (%.2f ms):\n", p, k, r, e
  printf "  rank end, no leftover           %7.2f ms  +%.2f ms\n", a, a - e
  printf "  rank end, one 16 MiB leftover   %7.2f ms  +%.2f ms\n", b, b - e
  printf "  rank end, segments held         %7.2f ms  +%.2f ms\n", h, h - e
  printf "  probe listing of /dev/shm       %7.2f ms  +%.2f ms\n", c, c - e }'
