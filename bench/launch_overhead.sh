#!/usr/bin/env bash
# What dtrain launch costs: start-up/teardown of an N-rank local job that does nothing, and the
# throughput of per-rank log capture (a rank writing LINES lines through dtrain vs straight to a
# file), measured side by side in one run. Usage: bench/launch_overhead.sh [BUILD_DIR] [LINES]
set -euo pipefail
build=${1:-build}
lines=${2:-2000000}
dtrain=$(cd "$build" && pwd)/dtrain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

now() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc; }

for ranks in 1 4 16; do
  t0=$(now)
  for i in 1 2 3 4 5; do
    NPROC_PER_NODE=$ranks "$dtrain" launch --quiet --job "empty-$ranks-$i" -- true 2>/dev/null
  done
  t1=$(now)
  echo "empty job, $ranks ranks: $(echo "scale=3; ($t1 - $t0) / 5" | bc) s per launch"
done

t0=$(now)
seq 1 "$lines" > direct.log
t1=$(now)
"$dtrain" launch --quiet --job capture -- seq 1 "$lines" 2>/dev/null
t2=$(now)
cmp -s direct.log dtrain-logs/capture/rank-0.log && same=identical || same=DIFFERENT
direct=$(elapsed "$t0" "$t1")
captured=$(elapsed "$t1" "$t2")
bytes=$(stat -c %s direct.log)
echo "log capture, $lines lines ($bytes bytes): direct ${direct} s, through dtrain ${captured} s" \
     "($(echo "scale=1; $bytes / $captured / 1048576" | bc) MiB/s; ratio $(echo "scale=2; $captured / $direct" | bc)x; logs $same)"
