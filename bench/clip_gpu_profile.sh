#!/usr/bin/env bash
# Where a dtrain-clip step's GPU time goes, kernel by kernel, beside the PyTorch reference: each
# program trains the same model on synthetic data under the PyTorch profiler for a few steps
# after warm-up (dtrain-clip with --profile-steps; bench/clip_reference.py with torch.profiler),
# then bench/clip_kernels.py sums the kernels per step by class and by name, side by side.
# bench/clip_gpu.sh runs it at its first batch size (--profile on, the default); on its own, run it
# after bench/clip_gpu.sh on the same machine (it reuses that build):
#
#   bench/clip_gpu_profile.sh [--build-dir build-gpu] [--out DIR] [--batch-size 256]
#                             [--device cuda|cpu] [--steps 3] [--warmup-steps 20]
#
# Writes DIR/clip_kernels.txt (the tables) and DIR/clip_kernels.json; the traces stay in
# DIR/clip_profile/ (tens of MB each). Programs: dtrain-clip (text cut at the longest caption),
# dtrain-clip-casts-per-use (--weight-copies off: autocast's cast of each matrix weight at its
# use), dtrain-clip-fused-bias-grad (--fused-bias-grad on: bias gradients from the weight
# gradients' cuBLASLt products), dtrain-clip-whole-text (every text position, the references'
# work), dtrain-clip-graphs, eager. Besides GPU time, the host's work per step: operators, top-level ones, autograd nodes.
# --device cpu runs it on the CPU with the fmnist-tiny preset under bfloat16 autocast, as on a GPU
# (batch 16 unless given): no kernels, but the table of ATen operators per step that differ between
# the programs (a zero fill, a copy or a cast one does and the other not) is the GPU step's; the
# CTest bench.clip_gpu_cpu runs it so, through bench/clip_gpu.sh --device cpu.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
die() { echo "clip_gpu_profile: $*" >&2; exit 2; }

build_dir=$root/build-gpu out=${OUT:-$PWD/clip_gpu_results} batch="" device=cuda steps=3 warmup=20
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warmup=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
done
clip=$build_dir/dtrain-clip
[ -x "$clip" ] || die "no dtrain-clip in $build_dir (build it, or run bench/clip_gpu.sh first)"
. "$here/clip_gpu_env.sh"
clip_gpu_python
clip_gpu_carry "${DTRAIN_CARRY:-}"

first=$((warmup + 1)) last=$((warmup + steps)) total=$((warmup + steps + 2))
if [ "$device" = cpu ]; then
  model=fmnist-tiny precision=amp_bf16 extra=(--threads 1) bpe=() batch=${batch:-16}
else
  model=vit-b-32 precision=amp_bf16 extra=() batch=${batch:-256}
  vocab=$(clip_gpu_bpe_vocab)
  bpe=(--bpe-vocab "$vocab")
fi
mkdir -p "$out/clip_profile"
out=$(cd "$out" && pwd)
work=$out/clip_profile

traces=()
profile_clip() {  # NAME FLAGS...
  local name=$1; shift
  echo "clip_gpu_profile: $name, batch $batch, steps $first-$last profiled"
  if "$clip" train --model "$model" --dataset-type synthetic --batch-size "$batch" \
      --train-num-samples $((batch * total)) --max-steps "$total" --zeroshot-frequency 0 \
      --save-frequency 0 --logs "$work/$name" --log-every-n-steps 1000 --seed 0 \
      --device "$device" --precision "$precision" "${bpe[@]}" "${extra[@]}" \
      --profile-steps "$first-$last" --profile-file "$work/$name.pt.trace.json" "$@" \
      >"$work/$name.log" 2>&1; then
    traces+=("$name=$work/$name.pt.trace.json")
  else
    echo "clip_gpu_profile: $name failed:"; tail -5 "$work/$name.log"
  fi
}
profile_clip dtrain-clip
profile_clip dtrain-clip-casts-per-use --weight-copies off
profile_clip dtrain-clip-fused-bias-grad --fused-bias-grad on
profile_clip dtrain-clip-whole-text --text-context whole
profile_clip dtrain-clip-graphs --cuda-graphs on

echo "clip_gpu_profile: eager (bench/clip_reference.py), batch $batch, steps $first-$last profiled"
if "$python" "$here/clip_reference.py" --model "$model" --mode eager --device "$device" \
    --precision "$precision" --batch-size "$batch" --warmup-steps "$warmup" --steps $((steps + 2)) \
    ${extra[@]+"${extra[@]}"} --profile-steps "$first-$last" \
    --profile-file "$work/eager.pt.trace.json" >"$work/eager.log" 2>&1; then
  traces+=("eager=$work/eager.pt.trace.json")
else
  echo "clip_gpu_profile: eager failed:"; tail -5 "$work/eager.log"
fi
[ ${#traces[@]} -gt 0 ] || die "no program ran"
"$python" "$here/clip_kernels.py" --steps "$steps" --json "$out/clip_kernels.json" "${traces[@]}" \
  | tee "$out/clip_kernels.txt"
