#!/usr/bin/env bash
# What dtrain-clip's heartbeat costs a training step: the same short data-parallel run (synthetic
# data, RANKS local ranks through dtrain launch, stall timeout 5 s so the heartbeat is written
# every second and the store is asked as often) with the heartbeat thread (default) and without
# (DTRAIN_HEARTBEAT=0), alternated REPEATS times; prints ms per step, the medians and the ratio
# (target: <= 0.5 % more). The in-memory stores on the step's path happen in both runs.
# Usage: bench/heartbeat_cost.sh [BUILD_DIR]   (env: RANKS STEPS BATCH REPEATS STALL_TIMEOUT;
# STALL_TIMEOUT, default 5, sets the heartbeat's period: a fifth of it, between 0.2 and 2 s)
set -euo pipefail
source "$(dirname "$0")/off_on_runs.sh"
build=$(cd "${1:-build}" && pwd)
dtrain=${DTRAIN:-$build/dtrain}
clip=${DTRAIN_CLIP:-$build/dtrain-clip}
ranks=${RANKS:-2}
steps=${STEPS:-60}
batch=${BATCH:-64}
repeats=${REPEATS:-3}
stall_timeout=${STALL_TIMEOUT:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {
  local mode=$1 job=$2 off=1
  [[ $mode == off ]] && off=0
  DTRAIN_HEARTBEAT=$off MASTER_PORT=$((20000 + RANDOM % 20000)) NPROC_PER_NODE=$ranks \
    "$dtrain" launch --quiet --log-dir "$work/logs" --job "$job" --stall-timeout "$stall_timeout" \
    -x DTRAIN_HEARTBEAT -- \
    "$clip" train --dataset-type synthetic --max-steps "$steps" \
    --batch-size "$batch" --train-num-samples $((steps * batch * ranks)) >/dev/null 2>&1
  clip_ms_per_step "$work/logs/$job/rank-0.log" 3
}

alternate_off_on heartbeat
echo "median ms/step: without heartbeat $off, with heartbeat $on;" \
     "ratio $(echo "scale=4; $on / $off" | bc) ($(echo "scale=2; 100 * ($on - $off) / $off" | bc) %)"
