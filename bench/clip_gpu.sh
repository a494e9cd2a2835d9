#!/usr/bin/env bash
# dtrain-clip on a GPU, in one call: build the runtime on its own against the torch that python3
# imports, check it (--version, a smoke training, `dtrain-clip check`: the step's attention,
# patch embedding, LayerNorm kernels and captured step against references on this GPU), then
# measure dtrain-clip against the same model in PyTorch (bench/clip_reference.py: eager with
# SDPA, torch.compile, torch.compile reduce-overhead = CUDA graphs, and the real open_clip when it
# imports) at batch 256 and 512, ViT-B/32, bf16 autocast, synthetic data: samples/s, ratio to
# eager, MFU from counted FLOPs, the share of the step waiting for data, peak GPU memory,
# dtrain-clip's per-phase split. Writes ONE
# results file, $OUT/clip_gpu_results.json (else ./clip_gpu_results/; the table inside:
# `jq -r '.table[]' FILE`), logs beside it in clip_gpu_logs/, and prints "what to fix": the gaps
# to the targets (>= 1.35x eager, >= reduce-overhead, data wait < 2 %, peak memory <= eager's).
# dtrain-clip-graphs is dtrain-clip with --cuda-graphs on (the step captured once and replayed;
# on the CPU the same static-buffer step runs eagerly), measured beside the eager dtrain-clip;
# on a GPU also dtrain-clip-gpu-spans (--gpu-timed-spans on: its cost, and the phases timed by
# CUDA events), dtrain-clip-casts-per-use (--weight-copies off: autocast's cast of each
# matrix weight at its use) and dtrain-clip-fused-bias-grad (--fused-bias-grad on: bias gradients
# from the weight gradients' cuBLASLt products); dtrain-clip-whole-text (--text-context whole) does the references'
# text work, all 77 positions, where dtrain-clip stops at the batch's longest caption;
# dtrain-clip-jpeg reads real files: WebDataset shards of Fashion-MNIST test images as JPEGs at
# the model's size (224x224 RGB for vit-b-32, made once by `dtrain-clip export-data`), decoded
# by loader threads. Last, the loader alone on this machine's cores: those shards loaded as the
# GPU path takes them by 1, 2, 4, ... threads up to the cores (data_loader_bench --scaling, built
# beside dtrain-clip), samples/s against the goal of 10,000 on 16 threads.
# Right after the runs at the first batch size, bench/clip_gpu_profile.sh says where each
# program's GPU time goes, by kernel class into the results file and by kernel into
# clip_kernels.txt (--profile off skips it), so one call of a GPU machine says both how fast and
# why. bench/clip_gpu.py says how each figure is taken. Everything stops by --budget seconds (570
# on a GPU): runs that would not fit are skipped and named.
#
#   bench/clip_gpu.sh [--device cuda|cpu] [--build-dir DIR] [--out DIR] [--carry DIR]
#                     [--batch-sizes 256,512] [--impls dtrain-clip,eager,...] [--steps N]
#                     [--warmup-steps N] [--budget S] [--profile on|off] [--cpu-compile]
#   bench/clip_gpu.sh --carry-prepare DIR
#
# --build-dir DIR  use the dtrain-clip (and dtrain, when there) already built in DIR; without it
#                  the script configures and builds build-gpu/ (runtime/ on its own, -j$(nproc)).
# --device cpu     the same script end to end on the CPU with the fmnist-tiny preset, batch 32,
#                  1 thread, no CUDA graphs and (unless --cpu-compile: ~140 s cold on 2 cores) no
#                  torch.compile, so the script itself never rots: CTest bench.clip_gpu_cpu.
#
# A GPU machine without libpng/libjpeg/zlib headers (the runtime's find_package(PNG/JPEG/ZLIB)):
# on a machine that has them, `--carry-prepare build-carry` copies their headers and shared
# libraries (cp -L: plain files, no links), a MANIFEST (packages, newest GLIBC symbol they need),
# OpenCLIP's bpe_simple_vocab_16e6.txt.gz (the vit-b-32 text tower needs it) and Fashion-MNIST's
# test split (4.4 MB, for dtrain-clip-jpeg's shards) into
# build-carry/ (ignored by git, so it travels only when named), and the wheels of open_clip_torch,
# ftfy and wcwidth when this machine's Python has them. On the GPU, --carry DIR or
# DTRAIN_CARRY=DIR (default: build-carry/ when it exists) puts DIR on CMAKE_PREFIX_PATH and
# DIR/lib on LD_LIBRARY_PATH, and where open_clip does not import, installs the carried wheels
# into a folder of its own on PYTHONPATH:
#   bench/clip_gpu.sh --carry-prepare build-carry      # here, once
#   bench/clip_gpu.sh                                  # there, with build-carry/ copied beside
# A second call on the still-warm machine reuses build-gpu/ (add --build-dir build-gpu) and can
# pick what the budget left out, e.g. --batch-sizes 512 --impls dtrain-clip,eager,compile.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in bench/
started=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "clip_gpu: $*" >&2; exit 2; }

device=cuda build_dir="" out=${OUT:-$PWD/clip_gpu_results} carry=${DTRAIN_CARRY:-}
batch_sizes="" impls="" steps="" warmup="" budget="" cpu_compile=0 prepare="" profile=on
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --carry) carry=$2; shift 2 ;;
    --carry-prepare) prepare=$2; shift 2 ;;
    --batch-sizes) batch_sizes=$2; shift 2 ;;
    --impls) impls=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warmup=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --cpu-compile) cpu_compile=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
done
case $device in cpu|cuda|cuda:[0-9]*) ;; *) die "--device: expected cpu, cuda or cuda:N" ;; esac
case $profile in on|off) ;; *) die "--profile: expected on or off" ;; esac

. "$here/clip_gpu_env.sh"
clip_gpu_python

# ---- --carry-prepare: what the runtime's CMake finds for PNG, JPEG and ZLIB, and the BPE vocab.
if [ -n "$prepare" ]; then
  mkdir -p "$prepare/include" "$prepare/lib"
  arch=$(gcc -print-multiarch 2>/dev/null || true)
  for h in png.h pngconf.h pnglibconf.h jpeglib.h jmorecfg.h jerror.h jconfig.h zlib.h zconf.h; do
    src=""
    for d in /usr/include ${arch:+/usr/include/$arch} /usr/include/libpng16; do
      [ -f "$d/$h" ] && { src=$d/$h; break; }
    done
    [ -n "$src" ] || die "--carry-prepare: no $h here (install libpng-dev, libjpeg-dev, zlib1g-dev)"
    cp -L "$src" "$prepare/include/$h"
  done
  : >"$prepare/MANIFEST"
  glibc=0
  for dev in libpng.so libjpeg.so libz.so; do
    path=$(gcc -print-file-name="$dev")
    [ -e "$path" ] || die "--carry-prepare: the compiler finds no $dev"
    real=$(readlink -f "$path")
    soname=$(objdump -p "$real" | awk '/SONAME/{print $2}')
    # The link-time name and the run-time name, both as plain files (links may not travel).
    cp -L "$real" "$prepare/lib/$dev"
    cp -L "$real" "$prepare/lib/$soname"
    pkg=$( (dpkg -S "$real" || dpkg -S "${real#/usr}") 2>/dev/null | head -1 | cut -d: -f1 || true)
    ver=$([ -n "$pkg" ] && dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo "?")
    need=$(objdump -T "$real" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k1,1 -k2,2n -V | tail -1)
    echo "lib $soname from $real (${pkg:-?} $ver), needs $need" >>"$prepare/MANIFEST"
    glibc=$(printf '%s\n%s\n' "$glibc" "${need#GLIBC_}" | sort -V | tail -1)
  done
  echo "glibc_min $glibc" >>"$prepare/MANIFEST"
  bpe=$(bpe_in_open_clip || true)
  if [ -n "$bpe" ] && [ -f "$bpe" ]; then
    cp "$bpe" "$prepare/bpe_simple_vocab_16e6.txt.gz"
    echo "bpe_simple_vocab_16e6.txt.gz from $bpe" >>"$prepare/MANIFEST"
  else
    echo "clip_gpu: warning: no open_clip in $python: no BPE vocab carried (vit-b-32 needs one)" >&2
  fi
  # OpenCLIP's own model as a peer on a machine without it: its wheel and the two it needs that a
  # torch image seldom has (pure Python, py3-none-any), at the versions this machine runs.
  oc=$("$python" -c 'import importlib.metadata as m; print(m.version("open_clip_torch"))' 2>/dev/null || true)
  if [ -n "$oc" ]; then
    mkdir -p "$prepare/wheels"
    wheels=("open_clip_torch==$oc")
    for dep in ftfy wcwidth; do
      v=$("$python" -c "import importlib.metadata as m; print(m.version('$dep'))" 2>/dev/null || true)
      [ -n "$v" ] && wheels+=("$dep==$v")
    done
    if "$python" -m pip download -q --no-deps --only-binary=:all: -d "$prepare/wheels" "${wheels[@]}" >&2; then
      echo "wheels ${wheels[*]}" >>"$prepare/MANIFEST"
    else
      echo "clip_gpu: warning: pip could not download ${wheels[*]}: no OpenCLIP wheel carried" >&2
    fi
  fi
  fm=$(carry="" clip_gpu_fashion_mnist)
  if [ -n "$fm" ]; then
    mkdir -p "$prepare/fashion-mnist"
    cp "$fm"/t10k-images-idx3-ubyte.gz "$fm"/t10k-labels-idx1-ubyte.gz "$prepare/fashion-mnist/"
    echo "fashion-mnist test split from $fm" >>"$prepare/MANIFEST"
  else
    echo "clip_gpu: warning: no Fashion-MNIST here (dataset-fashion-mnist): dtrain-clip-jpeg will be skipped" >&2
  fi
  echo "prepared on $(. /etc/os-release && echo "$PRETTY_NAME"), $(date -u +%FT%TZ)" >>"$prepare/MANIFEST"
  cat "$prepare/MANIFEST"
  echo "clip_gpu: carry $prepare ($(du -sh "$prepare" | cut -f1)): DTRAIN_CARRY=$prepare bench/clip_gpu.sh"
  exit 0
fi

clip_gpu_carry "$carry"

if [ "$device" = cpu ]; then
  model=fmnist-tiny
  batch_sizes=${batch_sizes:-32} steps=${steps:-10} warmup=${warmup:-3} budget=${budget:-240}
  compile=""
  [ $cpu_compile = 1 ] && compile=,compile
  impls=${impls:-dtrain-clip,dtrain-clip-graphs,dtrain-clip-whole-text,dtrain-clip-jpeg,eager$compile,open_clip}
else
  model=vit-b-32
  batch_sizes=${batch_sizes:-256,512} steps=${steps:-40} warmup=${warmup:-10} budget=${budget:-570}
  impls=${impls:-dtrain-clip,dtrain-clip-casts-per-use,dtrain-clip-fused-bias-grad,dtrain-clip-graphs,dtrain-clip-gpu-spans,dtrain-clip-whole-text,dtrain-clip-jpeg,eager,compile-reduce-overhead,compile,open_clip}
  "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    die "$python's torch sees no GPU (torch.cuda.is_available() is False); --device cpu runs on the CPU"
fi
bpe=""
[ "$model" = vit-b-32 ] && bpe=$(clip_gpu_bpe_vocab)

mkdir -p "$out/clip_gpu_logs"
out=$(cd "$out" && pwd)
logs=$out/clip_gpu_logs
build_json=$logs/build.json

# ---- 1. build (unless --build-dir): runtime/ on its own against this torch.
configure_s=0 build_s=0 build_ok=1 built=0
if [ -z "$build_dir" ]; then
  build_dir=$root/build-gpu
  built=1
  torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  command -v cmake >/dev/null || die "no cmake on this machine"
  echo "clip_gpu: configuring $build_dir against $torch_prefix${carry:+ and $carry}"
  t0=$(date +%s)
  cmake -S "$root/runtime" -B "$build_dir" "${generator[@]}" \
    -DCMAKE_PREFIX_PATH="$torch_prefix${carry:+;$carry}" >"$logs/configure.log" 2>&1 || build_ok=0
  t1=$(date +%s)
  configure_s=$((t1 - t0))
  if [ $build_ok = 1 ]; then
    echo "clip_gpu: building dtrain-clip, $(nproc) jobs"
    cmake --build "$build_dir" --target dtrain-clip -j"$(nproc)" >"$logs/build.log" 2>&1 || build_ok=0
    # The loader alone on this machine's cores (clip_gpu.py, loader_scaling): plain C++, and no
    # reason to give up the measurements when it does not build.
    cmake --build "$build_dir" --target data_loader_bench -j"$(nproc)" >>"$logs/build.log" 2>&1 ||
      echo "clip_gpu: data_loader_bench did not build (see $logs/build.log): no loader scaling"
  fi
  build_s=$(($(date +%s) - t1))
fi
[ -d "$build_dir" ] || die "--build-dir $build_dir: no such folder"
build_dir=$(cd "$build_dir" && pwd)
[ -x "$build_dir/dtrain-clip" ] || build_ok=0
"$python" - "$build_json" "$build_dir" "$built" "$build_ok" "$configure_s" "$build_s" "${carry:-}" \
  "$logs" <<'PY'
import json, os, subprocess, sys
path, build_dir, built, ok, conf_s, build_s, carry, logs = sys.argv[1:]
rec = {"build_dir": build_dir, "built_here": built == "1", "ok": ok == "1",
       "configure_s": int(conf_s), "build_s": int(build_s), "carry": carry or None}
for name in ("cmake", "c++", "nvcc"):
    try:
        rec[name] = subprocess.run([name, "--version"], capture_output=True, text=True,
                                   timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        rec[name] = None
if ok != "1":
    for log in ("build.log", "configure.log"):
        p = os.path.join(logs, log)
        if os.path.exists(p):
            rec["log_tail"] = open(p, errors="replace").read().splitlines()[-25:]
            rec["log"] = p
            break
json.dump(rec, open(path, "w"), indent=1)
PY
if [ $build_ok = 1 ] && [ $built = 1 ]; then
  echo "clip_gpu: built in ${configure_s} s + ${build_s} s"
fi
if [ $build_ok = 0 ] && [ $built = 1 ]; then
  tail -25 "$logs/build.log" 2>/dev/null || tail -25 "$logs/configure.log"
  echo "clip_gpu: the build failed (logs in $logs); results: $out/clip_gpu_results.json" >&2
fi

# ---- 2-4. version, smoke training, the measured runs, the results file and what to fix.
dtrain=""
[ -x "$build_dir/dtrain" ] && dtrain=$build_dir/dtrain
profile_flag=()
[ "$profile" = on ] && profile_flag=(--profile)
exec "$python" "$here/clip_gpu.py" measure --clip "$build_dir/dtrain-clip" --dtrain "$dtrain" \
  --out "$out" --device "$device" --model "$model" --bpe-vocab "$bpe" \
  --batch-sizes "$batch_sizes" --impls "$impls" --steps "$steps" --warmup-steps "$warmup" \
  --python "$python" --deadline $((started + budget)) --build-json "$build_json" \
  --fashion-mnist "$(clip_gpu_fashion_mnist)" \
  ${profile_flag[@]+"${profile_flag[@]}"}
