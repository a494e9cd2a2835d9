#!/usr/bin/env bash
# What recording a timeline costs dtrain-clip: the same short data-parallel run (synthetic data,
# RANKS local ranks through dtrain launch) with and without --timeline, alternated REPEATS times
# so both see the same machine; prints each run's ms per step, the medians and the overhead in
# percent (target: <= 3%). Then the writer's cost per record, measured alone.
# Usage: bench/timeline_overhead.sh [BUILD_DIR]   (env: RANKS STEPS BATCH REPEATS; DTRAIN and
# DTRAIN_CLIP pick other binaries than BUILD_DIR's)
set -euo pipefail
source "$(dirname "$0")/off_on_runs.sh"
src=$(cd "$(dirname "$0")/.." && pwd)
clip_bench_setup "${1:-build}" 40 64

# One run; prints ms per step from rank 0's "done: N steps, ..., T s training" line.
run() {
  local mode=$1 job=$2 flags=()
  [[ $mode == on ]] && flags=(--timeline)
  MASTER_PORT=$((20000 + RANDOM % 20000)) NPROC_PER_NODE=$ranks \
    "$dtrain" launch --quiet --log-dir "$work/logs" --job "$job" "${flags[@]}" -- \
    "$clip" train --dataset-type synthetic --max-steps "$steps" "${flags[@]}" \
    --batch-size "$batch" --train-num-samples $((steps * batch * ranks)) >/dev/null 2>&1
  clip_ms_per_step "$work/logs/$job/rank-0.log" 2
}

clip_runs_header
alternate_off_on timeline
echo "median ms/step: without timeline $off, with timeline $on;" \
     "overhead $(echo "scale=2; 100 * ($on - $off) / $off" | bc) %"
trace="$work/logs/on-$repeats/timeline/rank-0.json"
if [[ -f $trace ]]; then
  records=$(grep -c '"ph"' "$trace" || true)
  echo "rank 0 trace: $(stat -c %s "$trace") bytes, $records records," \
       "$(( records / steps )) records per step"
fi
"$dtrain" timeline --log-dir "$work/logs" --job "on-$repeats" --summary | sed 's/^/  /'

# The writer alone: ns per record on the recording thread.
c++ -std=c++17 -O2 -I"$src" "$src/bench/timeline_record_cost.cpp" "$src/runtime/trace/timeline.cpp" \
  "$src/runtime/formats/json_object.cpp" \
  -o "$work/timeline_record_cost" -pthread
"$work/timeline_record_cost" "$work/cost.json"
