#!/usr/bin/env bash
# Builds Horovod from source for dtrain's Horovod tests; run by
# scripts/install-deps.sh (after .venv/ exists), or on its own.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv"
# Horovod: built from its sdist into its own environment,
# .venv-horovod/, which layers over .venv/ (one .pth line) so it sees the same
# torch 2.11 without a second multi-GB copy; nothing is installed into .venv/.
# Horovod 0.28.1 does not build against torch 2.11 unchanged; three edits are applied to the
# unpacked sdist (README "Horovod"):
#   1. C++17 instead of C++14, in CMakeLists.txt and horovod/torch/CMakeLists.txt: torch 2.x
#      headers need 17, and Gloo must be built with the same standard or
#      gloo::rendezvous::Store::kDefaultTimeout is defined twice at link time.
#   2. FindPytorch.cmake: Pytorch_CUDA forced off, so the extension is the CPU (Gloo) build;
#      its CUDA kernels would need a port to the CUDA 13 toolchain (not attempted).
#   3. horovod/common/gloo/gloo_context.cc, InitializeForProcessSet: use the global context's
#      HOROVOD_GLOO_IFACE. Stock 0.28.1 reads the process set's own, empty, interface there and
#      falls back to resolving the node's hostname; where that does not resolve (our namespace
#      nodes) Gloo's lookupAddrForHostname segfaults in hvd.init() on every multi-node job.
# The built wheel is cached in ~/.cache/dtrain-wheels so CI builds it once.
HOROVOD_VERSION=0.28.1
HVD_VENV="$ROOT/.venv-horovod"
WHEEL_CACHE="${DTRAIN_WHEEL_CACHE:-$HOME/.cache/dtrain-wheels}"
mkdir -p "$WHEEL_CACHE"
[ -x "$HVD_VENV/bin/python3" ] || "$VENV/bin/python3" -m venv "$HVD_VENV"
"$HVD_VENV/bin/python3" - "$VENV" <<'PY'
import pathlib, sys, sysconfig
base = pathlib.Path(sys.argv[1]).resolve()
own = pathlib.Path(sysconfig.get_paths()["purelib"])
rel = own.relative_to(pathlib.Path(sys.prefix))
(own / "dtrain-base-venv.pth").write_text(str(base / rel) + "\n")
PY
"$HVD_VENV/bin/python3" -m pip install -q --disable-pip-version-check \
  cloudpickle==3.1.2 wheel==0.45.1   # wheel: Horovod's setup.py needs bdist_wheel
HVD_WHEEL="$(ls "$WHEEL_CACHE"/horovod-$HOROVOD_VERSION-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$HVD_WHEEL" ]; then
  SRC="$WHEEL_CACHE/horovod-src"  # a fixed path, so ccache hits when it is built again
  rm -rf "$SRC" && mkdir -p "$SRC"
  "$HVD_VENV/bin/python3" -m pip download -q --disable-pip-version-check \
    --no-deps --no-binary :all: horovod==$HOROVOD_VERSION -d "$SRC"
  tar -xzf "$SRC/horovod-$HOROVOD_VERSION.tar.gz" -C "$SRC"
  HSRC="$SRC/horovod-$HOROVOD_VERSION"
  sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
    "$HSRC/CMakeLists.txt" "$HSRC/horovod/torch/CMakeLists.txt"
  sed -i 's/^string(TOUPPER "${Pytorch_CUDA}" Pytorch_CUDA)$/set(Pytorch_CUDA FALSE)/' \
    "$HSRC/cmake/Modules/FindPytorch.cmake"
  sed -i 's|^  assert(global_context.IsEnabled());$|&\n  gloo_iface_ = global_context.gloo_iface_;  // dtrain: HOROVOD_GLOO_IFACE for process sets too|' \
    "$HSRC/horovod/common/gloo/gloo_context.cc"
  grep -q "dtrain: HOROVOD_GLOO_IFACE" "$HSRC/horovod/common/gloo/gloo_context.cc"
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO \
  MAKEFLAGS="${MAKEFLAGS:--j2}" \
    nice -n 10 "$HVD_VENV/bin/python3" -m pip wheel --disable-pip-version-check \
      --no-deps --no-build-isolation -w "$WHEEL_CACHE" "$HSRC"
  rm -rf "$SRC"
  HVD_WHEEL="$(ls "$WHEEL_CACHE"/horovod-$HOROVOD_VERSION-*.whl | head -1)"
fi
"$HVD_VENV/bin/python3" -m pip install -q --disable-pip-version-check --no-deps \
  --force-reinstall "$HVD_WHEEL"
