#!/usr/bin/env bash
# What a resume costs when a node holds no copy of the checkpoint (nodes without shared storage,
# runtime/train/node_local_checkpoints.h): two dtrain-clip ranks, each the first rank of a node
# of its own (a log folder each), resume a ViT-B/32 checkpoint (parameters and AdamW moments) and
# stop before training. Side by side, in turns: both folders hold the checkpoint (each rank reads
# its own), and only rank 0's does (rank 0 reads it and sends it to rank 1 over Gloo, loopback
# here). Prints each run's wall time, the sender's own figure, and the ratio of the medians.
#
#   bench/node_local_resume.sh [BUILD_DIR] [REPEATS] [MODEL]    (build, 3, vit-b-32)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
repeats=${2:-3}
model=${3:-vit-b-32}
clip=$build/dtrain-clip
[ -x "$clip" ] || { echo "node_local_resume: no dtrain-clip in $build" >&2; exit 2; }
python=$root/.venv/bin/python3
vocab=$("$python" -c 'import open_clip, os; print(os.path.join(os.path.dirname(open_clip.__file__), "bpe_simple_vocab_16e6.txt.gz"))' 2>/dev/null || true)
bpe=()
[ "$model" = vit-b-32 ] && { [ -f "$vocab" ] || { echo "node_local_resume: vit-b-32 needs open_clip_torch in .venv (scripts/install-deps.sh)" >&2; exit 2; }; bpe=(--bpe-vocab "$vocab"); }
work=$(mktemp -d /tmp/node-local-resume-XXXXXX)
trap 'rm -rf "$work"' EXIT
train=(train --model "$model" --dataset-type synthetic --batch-size 2 --train-num-samples 64
       --epochs 1 --zeroshot-frequency 0 --save-frequency 0 --threads 1 --seed 0 "${bpe[@]}")

# Two ranks, rank R's DTRAIN_LOG_DIR $1/nodeR (or $1 for both with "shared"); prints the slower
# rank's wall time in seconds.
two_ranks() {
  local dirs=$1; shift
  local port=$((20000 + RANDOM % 20000)) r pids=() start
  start=$(date +%s.%N)
  for r in 0 1; do
    local dir=$dirs; [ "${shared:-}" = 1 ] || dir=$dirs/node$r
    RANK=$r LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      DTRAIN_LOG_DIR=$dir OMP_NUM_THREADS=1 "$clip" "${train[@]}" "$@" >"$work/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || { echo "node_local_resume: rank $r failed:" >&2; tail -5 "$work/rank$r.log" >&2; exit 1; }; done
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f\n", b - a }'
}

echo "node_local_resume: $model, a checkpoint of step 1 (2 ranks, batch 2)"
shared=1 two_ranks "$work/made" --max-steps 1 --save-every-n-steps 1 >/dev/null
ckpt=$work/made/checkpoints/epoch_latest.pt
echo "node_local_resume: checkpoint $(du -m "$ckpt" | cut -f1) MiB"
both=() one=()
for i in $(seq "$repeats"); do
  for kind in both one; do
    rm -rf "$work/run"; mkdir -p "$work/run/node0/checkpoints" "$work/run/node1/checkpoints"
    cp "$ckpt" "$work/run/node0/checkpoints/"
    [ "$kind" = both ] && cp "$ckpt" "$work/run/node1/checkpoints/"
    sync
    s=$(two_ranks "$work/run" --resume latest --max-steps 1)
    sent=$(grep -h "sent its checkpoint" "$work/rank1.log" | sed 's/.*(//; s/)$//' || true)
    printf '  run %d  %-28s %6.2f s  %s\n' "$i" "$([ $kind = both ] && echo 'both nodes hold it' || echo 'only rank 0 holds it')" "$s" "$sent"
    if [ "$kind" = both ]; then both+=("$s"); else one+=("$s"); fi
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mb=$(median "${both[@]}") mo=$(median "${one[@]}")
awk -v b="$mb" -v o="$mo" 'BEGIN { printf "node_local_resume: median %.2f s (both hold it) vs %.2f s (one sends it): %.2fx\n", b, o, o / b }'
