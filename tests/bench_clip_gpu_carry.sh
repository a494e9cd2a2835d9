#!/usr/bin/env bash
# bench/clip_gpu.sh --carry-prepare, made here and used as on a GPU machine that has none of it:
# the libpng/libjpeg/zlib headers and libraries the runtime's build finds, OpenCLIP's BPE
# vocabulary, Fashion-MNIST's test split and OpenCLIP's wheels (from PyPI, at .venv's versions);
# then clip_gpu_carry (bench/clip_gpu_env.sh) with a Python that has no open_clip: the carried
# wheels installed beside the folder and on PYTHONPATH.
#   tests/bench_clip_gpu_carry.sh REPO
set -euo pipefail
root=$1
out=$(mktemp -d /tmp/dtrain-clip-carry-XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$root/bench/clip_gpu.sh" --carry-prepare "$out/carry" >"$out/prepare.log" 2>&1 ||
  { cat "$out/prepare.log"; fail "--carry-prepare failed"; }
for f in include/png.h include/jpeglib.h include/zlib.h lib/libpng.so lib/libjpeg.so lib/libz.so \
         bpe_simple_vocab_16e6.txt.gz fashion-mnist/t10k-images-idx3-ubyte.gz MANIFEST; do
  [ -s "$out/carry/$f" ] || fail "no $f in the carried folder"
done
for w in open_clip_torch ftfy wcwidth; do
  compgen -G "$out/carry/wheels/$w-*.whl" >/dev/null || fail "no $w wheel carried"
done
grep -q '^glibc_min ' "$out/carry/MANIFEST" || fail "MANIFEST without glibc_min"

# There: a Python without open_clip.
"$root/.venv/bin/python3" -m venv "$out/bare" >/dev/null
python=$out/bare/bin/python3
"$python" -c 'import open_clip' 2>/dev/null && fail "the bare venv imports open_clip"
(
  # shellcheck disable=SC2317  # called by clip_gpu_env.sh
  die() { fail "$*"; }
  # shellcheck source=/dev/null
  . "$root/bench/clip_gpu_env.sh"
  clip_gpu_carry "$out/carry"
  case ":${PYTHONPATH:-}:" in *":$out/carry/site:"*) ;; *) fail "PYTHONPATH=${PYTHONPATH:-}" ;; esac
  case ":${LD_LIBRARY_PATH:-}:" in *":$out/carry/lib:"*) ;; *) fail "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" ;; esac
  "$python" -c 'import importlib.util as u, ftfy, wcwidth; assert u.find_spec("open_clip"), "no open_clip"' ||
    fail "the carried wheels do not import"
)
echo "carried folder made and used: $(du -sh "$out/carry" | cut -f1)"
