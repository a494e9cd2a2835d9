#!/usr/bin/env bash
# Zero-shot top-1 of fmnist-tiny on the 10,000 Fashion-MNIST test images after a fixed budget of
# training samples (batch 256, 2 threads; default 30,720 samples = 120 steps), with wall time.
# Reference measured with the same model in eager PyTorch: 0.649 after 30,720 samples.
#
#   bench/clip_quality.sh [path/to/dtrain-clip] [samples] [extra train flags...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
clip=${1:-${DTRAIN_CLIP:-$here/../build/dtrain-clip}}
samples=${2:-30720}
shift $(($# > 2 ? 2 : $#))
[ -x "$clip" ] || { echo "clip_quality: no dtrain-clip at $clip (pass its path)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
start=$(date +%s.%N)
"$clip" train --batch-size 256 --threads 2 --train-num-samples "$samples" --epochs 1 \
  --save-frequency 0 --logs "$work" --metrics-file "$work/m.jsonl" "$@" | grep -v '^epoch '
end=$(date +%s.%N)
python3 - "$work/m.jsonl" "$start" "$end" "$samples" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
top1 = [r["zeroshot_top1"] for r in rows if r.get("event") == "eval"][-1]
end = [r for r in rows if r.get("event") == "end"][-1]
print(f"samples {sys.argv[4]}: zero-shot top-1 {top1:.4f} (reference 0.649), "
      f"training {end['train_s']:.0f} s, wall {float(sys.argv[3]) - float(sys.argv[2]):.0f} s")
PY
