#!/bin/sh
# The cost of serving Horovod's rendezvous to every job (dtrain launch does, so a Horovod program
# needs no --horovod): (1) in-process, start+stop time, threads and memory of one
# HorovodRendezvous (bench/horovod_rendezvous_cost.cpp); (2) end to end, the wall time of
# `dtrain launch -np 2 true`, a job that does nothing, with the time of `true` itself beside it.
# Usage: bench/horovod_rendezvous_cost.sh [ROUNDS (200)] [LAUNCHES (20)]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-200}
launches=${2:-20}
dtrain=${DTRAIN:-$src/build/dtrain}
work=$(mktemp -d /tmp/hvd-rdzv-cost-XXXXXX)
trap 'rm -rf "$work"' EXIT
c++ -std=c++17 -O2 -I"$src" "$src/bench/horovod_rendezvous_cost.cpp" \
  "$src/launcher/horovod_rendezvous.cpp" -o "$work/cost" -lfmt -pthread
"$work/cost" "$rounds"
start=$(date +%s.%N)
i=0
while [ "$i" -lt "$launches" ]; do
  i=$((i + 1))
  "$dtrain" launch -q -np 2 --log-dir "$work/logs" --job "j$i" -- true 2>/dev/null
done
end=$(date +%s.%N)
echo "dtrain launch -np 2 true: $(echo "($end - $start) * 1000 / $launches" | bc -l | cut -c1-6) ms per job (mean of $launches)"
