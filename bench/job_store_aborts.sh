#!/bin/sh
# How often a 2-rank Gloo job without destroy_process_group (tests/torchrun/no_destroy.py) ends
# with a rank killed by SIGABRT ("terminate called without an active exception"): under dtrain
# with its own TCPStore (the default for Python jobs), under dtrain with rank 0 hosting the store
# (-x TORCHELASTIC_USE_AGENT_STORE=False, the behaviour before), and under torchrun. The
# launchers take turns run by run, so a change in the machine's load falls on all of them alike
# (the abort is a race inside the rank, and its rate grows with the load).
# Usage: bench/job_store_aborts.sh [RUNS (200)] [LINGER_S (0)]  — LINGER_S: how long rank 1
# stays after rank 0 left. SKIP_TORCHRUN=1 leaves torchrun out. Prints one line per launcher:
# runs, failed runs, aborted ranks by rank.
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

launchers="store host"
[ -n "${SKIP_TORCHRUN:-}" ] || launchers="$launchers torchrun"
for l in $launchers; do eval "failed_$l=0 r0_$l=0 r1_$l=0"; done

once() {  # launcher key; the job's logs go to $work/logs/j
  case $1 in
    store) "$dtrain" launch -q -np 2 --log-dir "$work/logs" --job j -- python "$script" ;;
    host) "$dtrain" launch -q -np 2 -x TORCHELASTIC_USE_AGENT_STORE=False \
      --log-dir "$work/logs" --job j -- python "$script" ;;
    torchrun) "$venv/torchrun" --standalone --nproc-per-node 2 "$script" ;;
  esac
}

i=0
while [ "$i" -lt "$runs" ]; do
  i=$((i + 1))
  for l in $launchers; do
    rm -rf "$work/logs" "$work/out"
    once "$l" >"$work/out" 2>&1 || eval "failed_$l=\$((failed_$l + 1))"
    for r in 0 1; do
      if grep -qs "terminate called" "$work/logs/j/rank-$r.log" ||
        grep -qs "exitcode: -6) local_rank: $r " "$work/out"; then
        eval "r${r}_$l=\$((r${r}_$l + 1))"
      fi
    done
  done
done

for l in $launchers; do
  case $l in
    store) name="dtrain (its TCPStore)" ;;
    host) name="dtrain (rank 0 hosts)" ;;
    torchrun) name="torchrun" ;;
  esac
  eval "echo \"$name: runs=$runs failed=\$failed_$l aborted_rank0=\$r0_$l aborted_rank1=\$r1_$l (linger ${linger}s)\""
done
