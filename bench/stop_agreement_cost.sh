#!/usr/bin/env bash
# What dtrain-clip's stop on a signal costs a training step: the same short data-parallel run
# (synthetic data, RANKS local ranks on Gloo through dtrain launch, epoch checkpoints only) with
# --save-on-signal on (the default: a 3-number allreduce started after every step and read after
# the next, so that every rank stops after the same step) and off, alternated REPEATS times; prints ms per step, the medians,
# the ratio, and the agreement's own bill from the "on" runs' end metrics (its time on the step's
# thread, per step and as a share of training). Then what it buys, once each way: rank 1 is sent
# SIGTERM after step STOP_AT; with it on, every rank stops after the same step with epoch_latest.pt of
# that step, off it ends at once and nothing mid-epoch is left to resume from.
# Usage: bench/stop_agreement_cost.sh [BUILD_DIR]   (env: RANKS STEPS BATCH REPEATS STOP_AT)
set -euo pipefail
source "$(dirname "$0")/off_on_runs.sh"
clip_bench_setup "${1:-build}" 200 16
stop_at=${STOP_AT:-20}

train() {  # train LOG_DIR JOB MODE [more flags]
  local logs=$1 job=$2 mode=$3
  shift 3
  MASTER_PORT=$((20000 + RANDOM % 20000)) NPROC_PER_NODE=$ranks \
    "$dtrain" launch --quiet --log-dir "$logs" --job "$job" -- \
    "$clip" train --dataset-type synthetic --batch-size "$batch" --zeroshot-frequency 0 \
    --save-frequency 1 --threads 1 --save-on-signal "$mode" "$@"
}

run() {
  local mode=$1 job=$2
  train "$work/logs" "$job" "$mode" --max-steps "$steps" \
    --train-num-samples $((steps * batch * ranks)) >/dev/null 2>&1
  clip_ms_per_step "$work/logs/$job/rank-0.log" 3
}

clip_runs_header
alternate_off_on "stop on a signal"
echo "median ms/step: off $off, on $on;" \
     "ratio $(echo "scale=4; $on / $off" | bc) ($(echo "scale=2; 100 * ($on - $off) / $off" | bc) %)"

python3 - "$work"/logs/on-*/metrics/rank-*.jsonl <<'PY'
import json, sys
ms = train_ms = steps = 0
for name in sys.argv[1:]:
    for line in open(name):
        event = json.loads(line)
        if event.get("event") == "end":
            ms += event["stop_agreement_ms"]
            train_ms += event["train_s"] * 1000
            steps += event["step"]
# Making the counts, starting the sum and waiting for the one started a step before (which a
# slower rank may still hold up): an upper bound on what the step's thread spends on it.
print(f"agreement bill over {len(sys.argv) - 1} rank runs: {ms:.1f} ms in {steps} rank-steps "
      f"({1000 * ms / steps:.1f} us a step), {100 * ms / train_ms:.2f} % of {train_ms / 1000:.1f} s "
      f"of training")
PY

rank_pid() {  # rank_pid LOG_DIR RANK: the dtrain-clip process of that rank of that job
  local pid
  for pid in $(pgrep -f "dtrain-clip train"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$2" &&
       tr '\0' '\n' < "/proc/$pid/environ" | grep -q "^DTRAIN_LOG_DIR=$1/"; then
      echo "$pid"
      return
    fi
  done
}

# One long epoch; rank 1's process gets SIGTERM once rank 0 logged step STOP_AT.
for mode in on off; do
  logs="$work/stop-$mode"
  train "$logs" stop "$mode" --train-num-samples 1000000 >/dev/null 2>&1 &
  launcher=$!
  metrics="$logs/stop/metrics/rank-0.jsonl"
  until [[ -f $metrics ]] && grep -q "\"step\":$stop_at," "$metrics"; do sleep 0.02; done
  kill -TERM "$(rank_pid "$logs" 1)"
  wait "$launcher" || true
  last=$(grep -o '"step":[0-9]*' "$metrics" | tail -1 | cut -d: -f2)
  saved=none
  [[ -f $logs/stop/checkpoints/epoch_latest.pt ]] && saved=written
  echo "--save-on-signal $mode, rank 1 sent SIGTERM after step $stop_at: rank 0's last step" \
       "$last, epoch_latest.pt $saved"
done
