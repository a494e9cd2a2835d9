#!/usr/bin/env bash
# Allreduce throughput of dtrain-clip's gradient fusion path against a raw c10d (ProcessGroupGloo)
# allreduce of the same bytes, 2 ranks on this machine, side by side in one run. Bus bandwidth as
# nccl-tests defines it: algbw x 2(n-1)/n.
# Usage: bench/allreduce.sh [BUILD_DIR] [TOTAL_MIB] [TENSORS] [ITERATIONS] [FUSION_MIB]
set -euo pipefail
build=${1:-build}
bench=$(cd "$build" && pwd)/allreduce_bench
[ -x "$bench" ] || { echo "build it first: cmake --build $build --target allreduce_bench" >&2; exit 2; }
shift || true
ranks=2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pids=()
for ((r = 0; r < ranks; r++)); do
  RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port OMP_NUM_THREADS=1 "$bench" "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
