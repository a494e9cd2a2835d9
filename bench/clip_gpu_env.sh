# What bench/clip_gpu.sh and bench/clip_gpu_profile.sh both need to find on a GPU machine, sourced
# by each after it set `root` (the repository) and `die`:
#   clip_gpu_python         sets python: $PYTHON, else the repository's .venv, else python3 (a GPU
#                           node's own wheel)
#   clip_gpu_carry DIR      checks a folder made by `bench/clip_gpu.sh --carry-prepare`, puts its
#                           lib/ on LD_LIBRARY_PATH, warns when its libraries need a newer glibc,
#                           installs its wheels/ (OpenCLIP) into DIR/site on PYTHONPATH when
#                           open_clip does not import; sets carry to its absolute path ("" when
#                           DIR is "" and there is no build-carry/)
#   clip_gpu_bpe_vocab      prints OpenCLIP's BPE vocabulary: the carried one, else open_clip's
#   clip_gpu_fashion_mnist  prints the folder of Fashion-MNIST's test split (the carried one, else
#                           Debian's), or nothing: dtrain-clip-jpeg's shards are made from it

clip_gpu_python() {
  python=${PYTHON:-}
  if [ -z "$python" ]; then
    python=python3
    "$root/.venv/bin/python3" -c 'import torch' 2>/dev/null && python=$root/.venv/bin/python3
  fi
  "$python" -c 'import torch' 2>/dev/null || die "$python cannot import torch"
}

clip_gpu_carry() {
  carry=$1
  if [ -z "$carry" ] && [ -d "$root/build-carry" ]; then carry=$root/build-carry; fi
  [ -n "$carry" ] || return 0
  [ -d "$carry/include" ] && [ -d "$carry/lib" ] ||
    die "carry $carry: no include/ and lib/ (make it with bench/clip_gpu.sh --carry-prepare)"
  carry=$(cd "$carry" && pwd)
  export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local need have
  need=$(awk '/^glibc_min/{print $2}' "$carry/MANIFEST" 2>/dev/null || true)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [ -n "$need" ] && [ -n "$have" ] &&
     [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | tail -1)" != "$have" ]; then
    echo "warning: carried libraries need GLIBC $need, this machine has $have" >&2
  fi
  if compgen -G "$carry/wheels/*.whl" >/dev/null && ! "$python" -c 'import open_clip' 2>/dev/null; then
    if [ ! -d "$carry/site/open_clip" ]; then
      "$python" -m pip install -q --no-index --no-deps --no-compile --target "$carry/site" \
        "$carry"/wheels/*.whl >&2 || echo "warning: the carried wheels did not install" >&2
    fi
    export PYTHONPATH=$carry/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}

bpe_in_open_clip() {
  "$python" -c 'import os, open_clip; print(os.path.join(os.path.dirname(open_clip.__file__), "bpe_simple_vocab_16e6.txt.gz"))' 2>/dev/null
}

clip_gpu_bpe_vocab() {
  local vocab=""
  if [ -n "${carry:-}" ] && [ -f "$carry/bpe_simple_vocab_16e6.txt.gz" ]; then
    vocab=$carry/bpe_simple_vocab_16e6.txt.gz
  else
    vocab=$(bpe_in_open_clip || true)
  fi
  [ -n "$vocab" ] && [ -f "$vocab" ] ||
    die "vit-b-32 needs bpe_simple_vocab_16e6.txt.gz: carry one (bench/clip_gpu.sh --carry-prepare) or install open_clip_torch"
  echo "$vocab"
}

clip_gpu_fashion_mnist() {
  local dir
  for dir in ${carry:+"$carry/fashion-mnist"} /usr/share/datasets/fashion-mnist; do
    if [ -f "$dir/t10k-images-idx3-ubyte.gz" ] && [ -f "$dir/t10k-labels-idx1-ubyte.gz" ]; then
      echo "$dir"
      return 0
    fi
  done
}
