#!/bin/sh
# How often a 2-rank Gloo job without destroy_process_group (tests/torchrun/no_destroy.py) ends
# with a rank killed by SIGABRT ("terminate called without an active exception"): under dtrain
# with its own TCPStore (the default for Python jobs), under dtrain with rank 0 hosting the store
# (-x TORCHELASTIC_USE_AGENT_STORE=False, the behaviour before), and under torchrun.
# Usage: bench/job_store_aborts.sh [RUNS (200)] [LINGER_S (0)]  — LINGER_S: how long rank 1
# stays after rank 0 left. Prints one line per launcher: runs, failed runs, aborted ranks by rank.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-200}
linger=${2:-0}
dtrain=${DTRAIN:-$here/build/dtrain}
venv=$here/.venv/bin
script=$here/tests/torchrun/no_destroy.py
work=$(mktemp -d /tmp/job-store-aborts-XXXXXX)
trap 'rm -rf "$work"' EXIT
export PATH="$venv:$PATH" NO_DESTROY_LINGER="$linger"

count() {  # name, then the command (the job's logs go to $work/logs/j)
  name=$1; shift
  failed=0 r0=0 r1=0 i=0
  while [ "$i" -lt "$runs" ]; do
    i=$((i + 1))
    rm -rf "$work/logs" "$work/out"
    "$@" >"$work/out" 2>&1 || failed=$((failed + 1))
    for r in 0 1; do
      if grep -qs "terminate called" "$work/logs/j/rank-$r.log" ||
        grep -qs "exitcode: -6) local_rank: $r " "$work/out"; then
        eval "r$r=\$((r$r + 1))"
      fi
    done
  done
  echo "$name: runs=$runs failed=$failed aborted_rank0=$r0 aborted_rank1=$r1 (linger ${linger}s)"
}

count "dtrain (its TCPStore)" "$dtrain" launch -q -np 2 --log-dir "$work/logs" --job j -- \
  python "$script"
count "dtrain (rank 0 hosts)" "$dtrain" launch -q -np 2 -x TORCHELASTIC_USE_AGENT_STORE=False \
  --log-dir "$work/logs" --job j -- python "$script"
if [ -z "${SKIP_TORCHRUN:-}" ]; then
  count "torchrun" "$venv/torchrun" --standalone --nproc-per-node 2 "$script"
fi
