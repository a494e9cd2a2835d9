#!/usr/bin/env bash
# dtrain-clip against the real OpenCLIP (open_clip_torch in .venv), side by side in one run.
#
# The same model (tests/open_clip/fmnist-tiny-bpe.json: fmnist-tiny's towers as an OpenCLIP config,
# RGB input and OpenCLIP's BPE tokenizer, so both programs build exactly the same network) trained
# on the same CSV that `dtrain-clip export-data` writes, with the same samples, batch, epochs,
# learning rate, weight decay, warmup, seed, compute threads and one data worker each:
#   OpenCLIP:    python -m open_clip_train.main (through bench/open_clip/train_openclip.py, which
#                registers the config and times train_one_epoch);
#   dtrain-clip: dtrain-clip train --dataset-type csv (its train_s: the same span).
# Both checkpoints are then evaluated the same way by bench/open_clip/zeroshot.py (dtrain-clip's
# through `dtrain-clip export-weights`). Prints samples/s, the ratio and zero-shot top-1 of each.
#
#   bench/openclip_compare.sh [BUILD_DIR]
#   env: SAMPLES (8192), BATCH (64), EPOCHS (1), THREADS (2), LR (1e-3), WARMUP (10)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
clip=$build/dtrain-clip
python=$root/.venv/bin/python3
config=$root/tests/open_clip/fmnist-tiny-bpe.json
samples=${SAMPLES:-8192} batch=${BATCH:-64} epochs=${EPOCHS:-1} threads=${THREADS:-2}
lr=${LR:-1e-3} warmup=${WARMUP:-10}
[ -x "$clip" ] || { echo "openclip_compare: no dtrain-clip in $build (build first)" >&2; exit 2; }
"$python" -c 'import open_clip_train' 2>/dev/null ||
  { echo "openclip_compare: $python has no open_clip_train: run scripts/install-deps.sh --tests" >&2; exit 2; }
bpe=$("$python" -c 'import open_clip,os; print(os.path.join(os.path.dirname(open_clip.__file__), "bpe_simple_vocab_16e6.txt.gz"))')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=$threads

"$clip" export-data --format csv --limit "$samples" --out "$work/data" >/dev/null
# Absolute image paths: OpenCLIP opens them as written, dtrain-clip takes either.
awk -F'\t' -v OFS='\t' -v d="$work/data/" 'NR==1{print;next}{$1=d $1; print}' \
  "$work/data/fashion-mnist-train.csv" >"$work/train.csv"

echo "openclip_compare: $samples samples, batch $batch, $epochs epoch(s), $threads threads, 1 worker"
"$python" "$here/open_clip/train_openclip.py" "$config" --train-data "$work/train.csv" \
  --dataset-type csv --model fmnist-tiny-bpe --batch-size "$batch" --epochs "$epochs" \
  --workers 1 --device cpu --precision fp32 --lr "$lr" --wd 0.1 --warmup "$warmup" \
  --seed 0 --save-frequency "$epochs" --logs "$work/openclip" --name run >"$work/openclip.log" 2>&1 ||
  { tail -20 "$work/openclip.log"; echo "openclip_compare: OpenCLIP failed" >&2; exit 1; }
oc_s=$(awk '/^openclip_train_s/{print $2}' "$work/openclip.log")

"$clip" train --dataset-type csv --train-data "$work/train.csv" --model-config "$config" \
  --bpe-vocab "$bpe" --batch-size "$batch" --epochs "$epochs" --workers 1 --threads "$threads" \
  --lr "$lr" --wd 0.1 --warmup "$warmup" --seed 0 --save-frequency "$epochs" \
  --zeroshot-frequency 0 --logs "$work/dtrain" --metrics-file "$work/dtrain.jsonl" \
  >"$work/dtrain.log" 2>&1 ||
  { tail -20 "$work/dtrain.log"; echo "openclip_compare: dtrain-clip failed" >&2; exit 1; }
dt_s=$("$python" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"end\"" in l][-1]["train_s"])' "$work/dtrain.jsonl")
"$clip" export-weights --checkpoint "$work/dtrain/checkpoints/epoch_$epochs.pt" \
  --model-config "$config" --out "$work/dtrain.safetensors" >/dev/null

oc_top1=$("$python" "$here/open_clip/zeroshot.py" "$config" "$work/openclip/run/checkpoints/epoch_$epochs.pt" | awk '{print $2}')
dt_top1=$("$python" "$here/open_clip/zeroshot.py" "$config" "$work/dtrain.safetensors" | awk '{print $2}')
seen=$((samples / batch * batch * epochs))
"$python" - "$seen" "$oc_s" "$dt_s" "$oc_top1" "$dt_top1" <<'PY'
import sys
seen, oc_s, dt_s, oc_top1, dt_top1 = int(sys.argv[1]), *map(float, sys.argv[2:])
print(f"{'program':<28}{'train s':>9}{'samples/s':>11}{'zero-shot top-1':>17}")
print(f"{'OpenCLIP (open_clip_train)':<28}{oc_s:>9.2f}{seen / oc_s:>11.1f}{oc_top1:>17.4f}")
print(f"{'dtrain-clip':<28}{dt_s:>9.2f}{seen / dt_s:>11.1f}{dt_top1:>17.4f}")
print(f"ratio dtrain-clip / OpenCLIP samples/s: {oc_s / dt_s:.2f}x")
PY
