#!/usr/bin/env bash
# What reading the log dir's history costs a launch (dtrain-launch(1) --hold-back: the nodes that
# earlier jobs quarantined, read back from their job.json) and the doctor (its `history` rule), on
# 3 SSH nodes (network namespaces, tests/cluster/make-cluster.sh; node2 the spare). The log dir
# holds N job records, copies of a real one (a launch that found node1 unreachable, its link down,
# and quarantined it), each written just now, so that every one is read (the worst case: records
# older than the window are not opened).
# A last row holds as many records of a job that quarantined nothing (most jobs): scanned for the
# word, not parsed. Side by side in one run, alternating: `dtrain launch ... -- true` with --hold-back 86400 and
# with --hold-back 0, median of REPEAT runs each, the ratio, and whether node1 was held back.
# Needs root.
# Usage: bench/hold_back_cost.sh [BUILD_DIR] [RECORDS] [REPEAT]   e.g. bench/hold_back_cost.sh build "0 100 1000" 5
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
sizes=${2:-0 100 1000}
repeat=${3:-5}
dtrain=$build/dtrain
[ -x "$dtrain" ] || { echo "build it first: cmake --build $build --target dtrain" >&2; exit 2; }
work=$(mktemp -d /tmp/dtrain-bench-hold-back.XXXXXX)
dir=$work/cluster
trap 'bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash "$src/tests/cluster/make-cluster.sh" up 3 "$dir" >/dev/null 2>&1
cluster=$dir/cluster.yaml
run() { bash "$src/tests/cluster/make-cluster.sh" exec "$dir" "$dtrain" "$@"; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# The real record: node1's link down at the start (unreachable, quarantined), the job on node0
# and the spare; then its link up again.
mkdir -p "$work/seed"
bash "$src/tests/cluster/make-cluster.sh" node "$dir" 1 ip link set eth0 down
run launch -c "$cluster" --log-dir "$work/seed" --job seed --spares 1 --hold-back 0 --quiet \
  -- sh -c 'exit 0' >/dev/null 2>&1 || true
bash "$src/tests/cluster/make-cluster.sh" node "$dir" 1 ip link set eth0 up
grep -q '"quarantined"' "$work/seed/seed/job.json" || { echo "the seed job quarantined no node" >&2; exit 1; }
seed_bytes=$(stat -c %s "$work/seed/seed/job.json")
# And a record of a job that quarantined nothing (most jobs): not parsed, only scanned.
run launch -c "$cluster" --log-dir "$work/seed" --job clean --spares 1 --hold-back 0 --quiet \
  -- sh -c 'exit 0' >/dev/null 2>&1 || true

# One launch; prints "wall_s held" (held: 1 when node1 was held back).
launch_once() {
  local logs=$1 hold=$2 job=b-$RANDOM$RANDOM start end
  start=$(date +%s.%N)
  run launch -c "$cluster" --log-dir "$logs" --job "$job" --spares 1 --hold-back "$hold" \
    --start-health-check off --health-watch 0 -- true >/dev/null 2>"$work/err" || true
  end=$(date +%s.%N)
  rm -rf "${logs:?}/$job"
  echo "$(echo "$end - $start" | bc -l) $(grep -c 'node node1 held back' "$work/err" || true)"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); each record $seed_bytes bytes; medians of $repeat alternating runs"
printf '%-12s %12s %12s %7s %8s\n' records read_s off_s ratio held
largest=$(echo $sizes | tr ' ' '\n' | sort -g | tail -1)
for n in $sizes "${largest}-clean"; do
  logs=$work/logs-$n
  seed=$work/seed/seed/job.json
  [ "${n%-clean}" = "$n" ] || seed=$work/seed/clean/job.json
  mkdir -p "$logs"
  for ((i = 0; i < ${n%-clean}; i++)); do
    mkdir -p "$logs/j$i" && cp "$seed" "$logs/j$i/job.json"
  done
  launch_once "$logs" 86400 >/dev/null  # warm-up: page cache, SSH
  : >"$work/a"
  : >"$work/b"
  for ((r = 0; r < repeat; r++)); do
    launch_once "$logs" 86400 >>"$work/a"
    launch_once "$logs" 0 >>"$work/b"
  done
  on=$(awk '{print $1}' "$work/a" | median)
  off=$(awk '{print $1}' "$work/b" | median)
  held=$(awk '{s += $2} END {print s "/" NR}' "$work/a")
  printf '%-12s %12.3f %12.3f %7.3f %8s\n' "$n" "$on" "$off" "$(echo "$on / $off" | bc -l)" "$held"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
