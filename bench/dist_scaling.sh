#!/usr/bin/env bash
# Data-parallel scaling of dtrain-clip on this machine: samples/s of fmnist-tiny with one rank and
# with two ranks (`dtrain launch`, NPROC_PER_NODE=2, Gloo over loopback) at the same per-rank
# batch, both with --timeline, run one after the other; then, from `dtrain timeline --summary` of
# the two-rank job, the share of each rank's time in which communication is not hidden behind
# compute. samples/s = global batch / mean step time, the first WARMUP steps left out.
#
#   bench/dist_scaling.sh [BUILD_DIR]
#   env: STEPS (40), WARMUP (5), BATCH (64, per rank), THREADS (1, per rank),
#        DATASET (synthetic; fmnist for Fashion-MNIST), EXTRA (more train flags)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
steps=${STEPS:-40}
warmup=${WARMUP:-5}
batch=${BATCH:-64}
threads=${THREADS:-1}
dataset=${DATASET:-synthetic}
python=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python3
for bin in dtrain dtrain-clip; do
  [ -x "$build/$bin" ] || { echo "dist_scaling: build $bin first (cmake --build $build --target $bin)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# shellcheck disable=SC2206
train=(train --dataset-type "$dataset" --batch-size "$batch" --threads "$threads"
  --max-steps "$steps" --train-num-samples $((steps * batch * 2)) --zeroshot-frequency 0
  --save-frequency 0 --log-every-n-steps 1000 ${EXTRA:-})

samples_per_s() {  # metrics file, ranks -> global samples/s over the steps after the warmup
  "$python" - "$1" "$2" "$batch" "$warmup" <<'PY'
import json, sys
path, ranks, batch, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(path) if '"event"' not in l]
times = [r["step_s"] for r in rows if r["step"] > warmup]
if not times:
    sys.exit(f"dist_scaling: {path}: no steps after the first {warmup}")
print(f"{batch * ranks / (sum(times) / len(times)):.1f}")
PY
}

echo "fmnist-tiny, $dataset data, batch $batch per rank, $threads thread(s) per rank, $steps steps ($warmup warm-up); load: $(uptime | sed 's/.*load average: //')"
"$build/dtrain-clip" "${train[@]}" --timeline --logs "$work/one" \
  --metrics-file "$work/one/metrics.jsonl" >"$work/one.log" 2>&1 ||
  { cat "$work/one.log" >&2; exit 1; }
one=$(samples_per_s "$work/one/metrics.jsonl" 1)

NPROC_PER_NODE=2 "$build/dtrain" launch --quiet --timeline --log-dir "$work/logs" --job two -- \
  "$build/dtrain-clip" "${train[@]}" >"$work/two.log" 2>&1 || { cat "$work/two.log" >&2; exit 1; }
two=$(samples_per_s "$work/logs/two/metrics/rank-0.jsonl" 2)
"$build/dtrain" timeline --log-dir "$work/logs" --job two --summary -o "$work/merged.json" \
  >"$work/summary.txt"

echo "1 rank:  $one samples/s"
echo "2 ranks: $two samples/s"
"$python" - "$one" "$two" "$work/summary.txt" <<'PY'
import re, sys
one, two, path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
text = open(path).read()
print(f"speed-up {two / one:.2f}x of the ideal 2x (scaling efficiency {two / one / 2:.0%})")
# Rank table rows: rank host steps step_ms compute (%) exposed (%) waiting (%) comm
rows = re.findall(r"^\s*(\d+)\s+\S+\s+\d+\s+([\d.]+)\s+[\d.]+\s+\(\s*([\d.]+)%\)\s+([\d.]+)\s+"
                  r"\(\s*([\d.]+)%\)\s+([\d.]+)\s+\(\s*([\d.]+)%\)\s+([\d.]+)", text, re.M)
for rank, step_ms, compute_pct, exposed_ms, exposed_pct, wait_ms, wait_pct, comm_ms in rows:
    print(f"rank {rank}: step {step_ms} ms, compute {compute_pct}%; communication not hidden behind compute "
          f"{exposed_pct}% of its time ({exposed_ms} ms of {comm_ms} ms of communication); "
          f"waiting {wait_pct}%")
overlap = re.search(r"^communication: .*$", text, re.M)
if overlap:
    print(overlap.group(0))
largest = re.search(r"^largest fused allreduces:\n(.*)$", text, re.M)
if largest:
    print("largest allreduce:", " ".join(largest.group(1).split()))
if not rows:
    print(text)
PY
