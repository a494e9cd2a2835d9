#!/usr/bin/env bash
# Samples/s of one fmnist-tiny training step (synthetic data, batch 256, 2 threads): dtrain-clip
# (C++/LibTorch) and the same model in eager PyTorch (bench/clip_eager.py, Debian's
# torch in .venv: the same LibTorch 2.x underneath), run alternately in one go; prints the ratio.
#
#   bench/clip_speed.sh [path/to/dtrain-clip]      env: ROUNDS (2), STEPS (10), THREADS (2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
clip=${1:-${DTRAIN_CLIP:-$here/../build/dtrain-clip}}
rounds=${ROUNDS:-2}
steps=${STEPS:-10}
threads=${THREADS:-2}
warmup=3
python=$here/../.venv/bin/python3
[ -x "$clip" ] || { echo "clip_speed: no dtrain-clip at $clip (pass its path)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || {
  echo "clip_speed: $python has no torch: run scripts/install-deps.sh --tests" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

# Each round reports the median step (after the warmup steps), so a burst of load from other
# processes on a shared machine moves the figure less than a mean would.
cpp_round() {
  local total=$((warmup + steps))
  rm -f "$work/m.jsonl"
  "$clip" train --dataset-type synthetic --batch-size 256 --threads "$threads" \
    --train-num-samples $((total * 256)) --max-steps "$total" --zeroshot-frequency 0 \
    --save-frequency 0 --logs "$work" --metrics-file "$work/m.jsonl" >/dev/null
  "$python" - "$work/m.jsonl" "$warmup" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"event"' not in l]
times = [r["step_s"] for r in rows if r["step"] > int(sys.argv[2])]
print(sorted(times)[len(times) // 2])
PY
}

py_round() {
  "$python" "$here/clip_eager.py" --batch-size 256 --threads "$threads" --steps "$steps" \
    --warmup-steps "$warmup" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])'
}

echo "fmnist-tiny training step, synthetic data, batch 256, $threads threads, $steps timed steps x $rounds rounds"
printf '%-8s %-16s %-16s\n' round "C++ median s" "PyTorch median s"
cpp_all=() py_all=()
for r in $(seq 1 "$rounds"); do
  c=$(cpp_round); p=$(py_round)
  cpp_all+=("$c"); py_all+=("$p")
  printf '%-8s %-16.4f %-16.4f\n' "$r" "$c" "$p"
done
"$python" - "${cpp_all[*]}" "${py_all[*]}" <<'PY'
import sys
c = [float(x) for x in sys.argv[1].split()]
p = [float(x) for x in sys.argv[2].split()]
cs, ps = 256 / (sum(c) / len(c)), 256 / (sum(p) / len(p))
print(f"dtrain-clip (C++):     {cs:8.1f} samples/s")
print(f"PyTorch eager (Python): {ps:8.1f} samples/s")
print(f"ratio C++/Python: {cs / ps:.2f}x (target >= 1.2x)")
PY
