#!/bin/sh
# Loader throughput of every dataset type, side by side in one run: builds data_loader_bench
# (plain C++, no LibTorch) and runs it on N exported Fashion-MNIST test images (default 10000).
# Usage: bench/data_loader_bench.sh [N] [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$here/build}
[ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ] || cmake -S "$here" -B "$build" -G Ninja
cmake --build "$build" --target data_loader_bench -j2 >/dev/null
exec "$build/data_loader_bench" "${1:-10000}"
