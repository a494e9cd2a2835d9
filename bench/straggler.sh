#!/usr/bin/env bash
# Stragglers: what a slow node costs a job, and what --on-straggler leave wins back. dtrain-clip
# (synthetic data, batch 16, STEPS steps, epoch_latest.pt every 20 steps, --resume latest; its
# metrics in the job folder, where the launcher reads the steps) on 3
# sshd nodes in network namespaces (tests/cluster, root), one rank each, under
# `dtrain launch --nnodes 2:3 --stall-timeout 5`. Three kinds of run, taking turns REPEAT times:
#   none    no fault;
#   report  when rank 2 (node2) has taken 10 steps, its process goes into a CPU cgroup with SHARE
#           of one CPU (the kernel throttles it, as heat or a power cap throttles a GPU), and
#           --on-straggler report: dtrain warns, the job runs on at its pace (what any launcher
#           without a straggler watch does, warning aside);
#   leave   the same throttle under --on-straggler leave: node2 leaves (its rank and the others
#           are sent SIGTERM, stop after the same step and checkpoint it: --save-on-signal), and
#           the job restarts on two nodes from there;
#   leave-off  the same with --save-on-signal off: the ranks end at once on SIGTERM, and the
#           restart goes back to the last checkpoint of every 20 steps.
# Per run: wall time, exit status, seconds from the throttle to the warning (report, leave), the
# steps the restart trained again (job.json's steps_lost; "-" without a restart), and
# rank 0's samples/s over its last attempt (for `leave`, the two nodes' restart; the global batch
# is then 32, not 48, and on this machine's 2 cores two ranks also run faster than three: on GPU
# nodes of their own, two nodes would train at two thirds of three). Then the medians, and the
# wall times' ratios to `none`.
# Usage: bench/straggler.sh [BUILD_DIR] [REPEAT] [SHARE] [STEPS]   (env KEEP=DIR keeps outputs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
repeat=${2:-3}
share=${3:-0.25}
steps=${4:-200}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, a CPU cgroup)" >&2; exit 1; }
[ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || { echo "needs the v1 cpu cgroup" >&2; exit 1; }
work=$(mktemp -d)
cluster=$work/cluster
cgroup=/sys/fs/cgroup/cpu/dtrain-bench-straggler-$$
cleanup() {
  pkill -9 -f "$work/ck" 2>/dev/null || true
  if [ -d "$cgroup" ]; then
    while read -r p; do echo "$p" >/sys/fs/cgroup/cpu/cgroup.procs || true; done <"$cgroup/cgroup.procs"
    rmdir "$cgroup" || true
  fi
  "$root/tests/cluster/make-cluster.sh" down "$cluster" >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$work"/*.txt "$KEEP"/ 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM  # the cleanup above, on the way out
"$root/tests/cluster/make-cluster.sh" up 3 "$cluster" 1 >/dev/null 2>&1
mkdir "$cgroup"
echo 100000 >"$cgroup/cpu.cfs_period_us"
awk -v s="$share" 'BEGIN { printf "%d\n", s * 100000 }' >"$cgroup/cpu.cfs_quota_us"

# One run of KIND as run N; prints "wall_s status named_s samples_s".
run() {
  local kind=$1 n=$2 job=$1-$2 out=$work/$1-$2.txt
  local policy=report on_signal=on
  [ "$kind" != report ] && policy=leave
  [ "$kind" = leave-off ] && on_signal=off
  local start throttled="" named=-1
  start=$(date +%s.%N)
  "$root/tests/cluster/make-cluster.sh" exec "$cluster" "$build/dtrain" launch -c "$cluster/cluster.yaml" --log-dir "$work/logs" --job "$job" \
    --nnodes 2:3 --hold-back 0 --stall-timeout 5 --on-straggler "$policy" -- "$build/dtrain-clip" train \
    --batch-size 16 --dataset-type synthetic --zeroshot-frequency 0 --save-frequency 0 \
    --threads 1 --train-num-samples 100000 --max-steps "$steps" --save-every-n-steps 20 \
    --resume latest --save-on-signal "$on_signal" --checkpoint-dir "$work/ck/$job" >"$out" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$kind" != none ] && [ -z "$throttled" ]; then
      local beat=$work/logs/$job/heartbeat/rank-2.txt step=0
      [ -f "$beat" ] && step=$(awk '$1 == "step" { print $2 }' "$beat")
      if [ "${step:-0}" -ge 10 ]; then
        awk '$1 == "pid" { print $2 }' "$beat" >"$cgroup/cgroup.procs"
        throttled=$(date +%s.%N)
      fi
    fi
    if [ -n "$throttled" ] && [ "$named" = -1 ] && grep -q "warning: straggler: " "$out"; then
      named=$(echo "$(date +%s.%N) - $throttled" | bc)
    fi
    sleep 0.1
  done
  local status=0
  wait "$pid" || status=$?
  local end
  end=$(date +%s.%N)
  local rate
  rate=$(grep -o "\[node0:0\] done: [0-9]* steps, [0-9.]* samples/s" "$out" | tail -1 |
    awk '{ print $5 }')
  local lost
  lost=$(python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["attempts"]
print(a[0].get("steps_lost", "-") if len(a) > 1 else "-")' "$work/logs/$job/job.json" 2>/dev/null || echo -)
  printf "%.1f %d %s %s %s\n" "$(echo "$end - $start" | bc)" "$status" "$named" "${rate:--}" "$lost"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

echo "3 ssh namespace nodes x 1 rank, dtrain-clip $steps steps; node2's rank throttled to $share of a CPU at step 10"
kinds="none report leave leave-off"
printf "%-9s %3s %8s %6s %8s %10s %10s\n" kind run wall_s status named_s samples_s steps_lost
for n in $(seq 1 "$repeat"); do
  for kind in $kinds; do
    read -r wall status named rate lost < <(run "$kind" "$n")
    [ "$named" != -1 ] && named=$(printf "%.1f" "$named")
    printf "%-9s %3d %8s %6s %8s %10s %10s\n" "$kind" "$n" "$wall" "$status" "$named" "$rate" "$lost"
    [ "$lost" != - ] && echo "$lost" >>"$work/lost-$kind"
    [ "$rate" != - ] && echo "$rate" >>"$work/rate-$kind"
    echo "$wall" >>"$work/wall-$kind"
    [ "$named" != -1 ] && echo "$named" >>"$work/named-$kind"
  done
done
none=$(median <"$work/wall-none")
for kind in $kinds; do
  m=$(median <"$work/wall-$kind")
  named=$( [ -s "$work/named-$kind" ] && median <"$work/named-$kind" || echo -)
  rate=$( [ -s "$work/rate-$kind" ] && median <"$work/rate-$kind" || echo -)
  lost=$( [ -s "$work/lost-$kind" ] && median <"$work/lost-$kind" || echo -)
  printf "median %-9s wall %6.1f s (%.2fx none), named after %s s, rank 0 %s samples/s, %s step(s) lost\n" \
    "$kind" "$m" "$(echo "$m / $none" | bc -l)" "$named" "$rate" "$lost"
done
