#!/usr/bin/env bash
# How long a small torch.distributed job takes from the launch to its end (import torch,
# init_process_group over Gloo, a barrier, destroy): under dtrain with the job's TCPStore (the
# default for Python jobs: the store's Python imports torch while the ranks import theirs), under
# dtrain with rank 0 hosting the store (-x TORCHELASTIC_USE_AGENT_STORE=False), under torchrun
# --standalone, and one `python -c "import torch.distributed"` as the floor. The launchers take
# turns round by round, so a change in the machine's load falls on all of them alike.
# Usage: bench/torch_job_start.sh [ROUNDS (10)] [RANKS (2)]
#   DTRAIN=path: the dtrain to measure (default build/dtrain); OTHER_DTRAIN=path: one more row,
#   another dtrain build measured alike (an older one, to compare).
# Prints per launcher the median and fastest wall time in seconds and the median's ratio to
# torchrun's.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-10}
ranks=${2:-2}
dtrain=${DTRAIN:-$here/build/dtrain}
venv=$here/.venv/bin
work=$(mktemp -d /tmp/torch-job-start-XXXXXX)
trap 'rm -rf "$work"' EXIT
export PATH="$venv:$PATH"
cat >"$work/job.py" <<'PY'
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
PY
cd "$work"

launchers="store host torchrun import"
[ -z "${OTHER_DTRAIN:-}" ] || launchers="other $launchers"

once() {
  case $1 in
    store) "$dtrain" launch -q -np "$ranks" --job "j$2-$1" job.py ;;
    other) "$OTHER_DTRAIN" launch -q -np "$ranks" --job "j$2-$1" python3 job.py ;;
    host) "$dtrain" launch -q -np "$ranks" -x TORCHELASTIC_USE_AGENT_STORE=False --job "j$2-$1" \
      job.py ;;
    torchrun) "$venv/torchrun" --standalone --nproc-per-node "$ranks" job.py ;;
    import) python3 -c "import torch.distributed" ;;
  esac
}

for i in $(seq 1 "$rounds"); do
  for l in $launchers; do
    t0=$(date +%s.%N)
    once "$l" "$i" >"$work/out" 2>&1 || { echo "$l failed:"; tail -5 "$work/out"; exit 1; }
    t1=$(date +%s.%N)
    echo "$l $(echo "$t1 - $t0" | bc)" >>"$work/times"
  done
done

stat() {  # launcher -> "median fastest"
  grep "^$1 " "$work/times" | cut -d' ' -f2 | sort -g |
    awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.2f %.2f", m, v[1]}'
}
read -r torchrun_median _ <<<"$(stat torchrun)"
echo "$ranks-rank torch.distributed job (Gloo init, barrier), $rounds rounds, $(nproc) cores:"
for l in $launchers; do
  case $l in
    store) name="dtrain (its TCPStore beside the ranks)" ;;
    other) name="dtrain at $OTHER_DTRAIN" ;;
    host) name="dtrain (rank 0 hosts the store)" ;;
    torchrun) name="torchrun --standalone" ;;
    import) name="one import torch.distributed (floor)" ;;
  esac
  read -r median fastest <<<"$(stat "$l")"
  printf "  %-42s median %5.2f s  fastest %5.2f s  %.2fx torchrun\n" "$name" "$median" "$fastest" \
    "$(echo "scale=4; $median / $torchrun_median" | bc)"
done
