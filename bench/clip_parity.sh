#!/usr/bin/env bash
# Does data-parallel training learn what one process learns? Zero-shot top-1 of fmnist-tiny on
# the 10,000 Fashion-MNIST test images after the same sample budget, (a) one process at global
# batch 2B and (b) two ranks (`dtrain launch`, NPROC_PER_NODE=2, Gloo over loopback) at batch B
# each, all other flags the defaults of `dtrain-clip train` (--gather-with-grad on). Prints both
# figures and their difference (expected within 0.02: only the data order and the float
# summation order differ). Each run takes a few minutes on two cores.
#
#   bench/clip_parity.sh [BUILD_DIR] [SAMPLES (30720)] [B (256)] [extra train flags...]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
samples=${2:-30720}
batch=${3:-256}
shift $(($# > 3 ? 3 : $#))
python=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python3
for bin in dtrain dtrain-clip; do
  [ -x "$build/$bin" ] || { echo "clip_parity: build $bin first (cmake --build $build --target $bin)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train=(train --train-num-samples "$samples" --epochs 1 --save-frequency 0)

top1() {  # metrics file -> last zero-shot top-1, training seconds
  "$python" - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
evals = [r["zeroshot_top1"] for r in rows if r.get("event") == "eval"]
end = [r for r in rows if r.get("event") == "end"]
if not evals or not end:
    sys.exit(f"clip_parity: {sys.argv[1]} has no eval or end line")
print(f"{evals[-1]:.4f} {end[-1]['train_s']:.0f}")
PY
}

echo "fmnist-tiny, $samples samples; load: $(uptime | sed 's/.*load average: //')"
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$build/dtrain-clip" "${train[@]}" \
  --batch-size $((2 * batch)) --threads 2 --logs "$work/one" --metrics-file "$work/one.jsonl" \
  "$@" >"$work/one.log" 2>&1 || { cat "$work/one.log" >&2; exit 1; }
read -r one one_s < <(top1 "$work/one.jsonl")
echo "1 process, batch $((2 * batch)):       zero-shot top-1 $one (training ${one_s} s)"

OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NPROC_PER_NODE=2 "$build/dtrain" launch --quiet \
  --log-dir "$work/logs" --job parity -- "$build/dtrain-clip" "${train[@]}" \
  --batch-size "$batch" --threads 1 "$@" >"$work/two.log" 2>&1 ||
  { cat "$work/two.log" >&2; exit 1; }
read -r two two_s < <(top1 "$work/logs/parity/metrics/rank-0.jsonl")
echo "2 ranks, batch $batch per rank: zero-shot top-1 $two (training ${two_s} s)"
"$python" -c "import sys; d = float(sys.argv[2]) - float(sys.argv[1]); \
print(f'difference (2 ranks - 1 process): {d:+.4f} (target within 0.02): ' + \
('within' if abs(d) <= 0.02 else 'NOT within'))" "$one" "$two"
echo "load after: $(uptime | sed 's/.*load average: //')"
