#!/usr/bin/env bash
# What dtrain-clip's heartbeat costs a training step: the same short data-parallel run (synthetic
# data, RANKS local ranks through dtrain launch, stall timeout 5 s so the heartbeat is written
# every second and the store is asked as often) with the heartbeat thread (default) and without
# (DTRAIN_HEARTBEAT=0), alternated REPEATS times; prints ms per step, the medians and the ratio
# (target: <= 0.5 % more). The in-memory stores on the step's path happen in both runs.
# On a small machine that difference is within the runs' spread, so it also prints the
# heartbeat's own bill from the "on" runs' end metrics: time in its setters on the step's path
# plus its writer thread's CPU time, as a share of the training time (an upper bound on what it
# can take from the step, as if every cycle of the writer were stolen from training).
# Usage: bench/heartbeat_cost.sh [BUILD_DIR]   (env: RANKS STEPS BATCH REPEATS STALL_TIMEOUT;
# STALL_TIMEOUT, default 5, sets the heartbeat's period: a fifth of it, between 0.2 and 2 s)
set -euo pipefail
source "$(dirname "$0")/off_on_runs.sh"
clip_bench_setup "${1:-build}" 60 64
stall_timeout=${STALL_TIMEOUT:-5}

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

clip_runs_header
alternate_off_on heartbeat
echo "median ms/step: without heartbeat $off, with heartbeat $on;" \
     "ratio $(echo "scale=4; $on / $off" | bc) ($(echo "scale=2; 100 * ($on - $off) / $off" | bc) %)"

python3 - "$work"/logs/on-*/metrics/rank-*.jsonl <<'PY'
import json, sys
path_ms = cpu_ms = train_ms = beats = 0
for name in sys.argv[1:]:
    for line in open(name):
        event = json.loads(line)
        if event.get("event") == "end":
            path_ms += event["heartbeat_path_ms"]
            cpu_ms += event["heartbeat_writer_cpu_ms"]
            beats += event["heartbeat_beats"]
            train_ms += event["train_s"] * 1000
print(f"heartbeat bill over {len(sys.argv) - 1} rank runs: {path_ms:.2f} ms in setters on the "
      f"step's path + {cpu_ms:.2f} ms writer CPU ({beats} beats) in {train_ms / 1000:.1f} s of "
      f"training: {100 * (path_ms + cpu_ms) / train_ms:.4f} %")
PY
