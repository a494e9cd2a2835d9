#!/usr/bin/env bash
# What dtrain launch costs: start-up/teardown of an N-rank local job that does nothing, the
# throughput of per-rank log capture (a rank writing LINES lines through dtrain vs straight to a
# file), the logs' syncs on and off, and the copies beside the logs (torchrun's
# --duplicate-stdout-filters, horovodrun's --output-filename) on and off, measured side by side in
# one run. Usage: bench/launch_overhead.sh [BUILD_DIR] [LINES]
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

# The rank logs' syncs (--log-sync, every second by default) against none, turn by turn: 8 ranks
# writing LINES lines between them, paced over a few seconds so that several syncs fall inside
# the job. Wall time, and CPU seconds of dtrain and its ranks (the syncs' thread is dtrain's; the
# ranks' CPU is the same both ways).
per_rank=$((lines / 8))
declare -A wall cpu
for round in 1 2 3; do
  for sync in 0 1; do
    t0=$(now)
    /usr/bin/time -f "%U %S" -o time.txt env NPROC_PER_NODE=8 "$dtrain" launch --quiet \
      --log-sync "$sync" --job "sync-$sync-$round" -- \
      sh -c "for i in 1 2 3 4; do seq 1 $((per_rank / 4)); sleep 0.5; done" 2>/dev/null
    t1=$(now)
    wall[$sync]="${wall[$sync]:-} $(elapsed "$t0" "$t1")"
    cpu[$sync]="${cpu[$sync]:-} $(awk '{print $1 + $2}' time.txt)"
  done
done
median() { printf '%s\n' $1 | sort -g | sed -n 2p; }
w0=$(median "${wall[0]}"); w1=$(median "${wall[1]}")
c0=$(median "${cpu[0]}"); c1=$(median "${cpu[1]}")
echo "log syncs, 8 ranks, $lines lines in 4 bursts: wall ${w0} s without, ${w1} s with" \
     "(ratio $(echo "scale=3; $w1 / $w0" | bc)x); CPU (dtrain and ranks) ${c0} s without, ${c1} s with" \
     "(ratio $(echo "scale=3; $c1 / $c0" | bc)x); median of 3 each"

# The copies of the ranks' output beside the logs against none, turn by turn: a rank writing LINES
# lines, those with a "7" kept by torchrun's filter (about half at 2,000,000) and all of them
# copied by horovodrun's --output-filename. Wall time and CPU seconds of dtrain and its rank; the
# filtered copy checked against grep.
declare -A cwall ccpu
for round in 1 2 3; do
  for copies in 0 1; do
    extra=()
    [ "$copies" = 1 ] && extra=(--duplicate-stdout-filters 7 --output-filename "copies-$round")
    t0=$(now)
    /usr/bin/time -f "%U %S" -o time.txt "$dtrain" launch --quiet "${extra[@]}" \
      --job "copies-$copies-$round" -- seq 1 "$lines" 2>/dev/null
    t1=$(now)
    cwall[$copies]="${cwall[$copies]:-} $(elapsed "$t0" "$t1")"
    ccpu[$copies]="${ccpu[$copies]:-} $(awk '{print $1 + $2}' time.txt)"
  done
done
kept=$(wc -l < "dtrain-logs/copies-1-1/filtered_stdout.log")
[ "$kept" = "$(grep -c 7 direct.log)" ] && check="filtered copy complete" || check="filtered copy has $kept lines: WRONG"
w0=$(median "${cwall[0]}"); w1=$(median "${cwall[1]}")
c0=$(median "${ccpu[0]}"); c1=$(median "${ccpu[1]}")
echo "output copies, $lines lines: wall ${w0} s without, ${w1} s with" \
     "(ratio $(echo "scale=3; $w1 / $w0" | bc)x); CPU (dtrain and rank) ${c0} s without, ${c1} s with" \
     "(ratio $(echo "scale=3; $c1 / $c0" | bc)x); median of 3 each; $check"
