#!/usr/bin/env bash
# torchrun's worker watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1) under torchrun and under
# dtrain launch, side by side on this machine, two ranks of tests/torchrun/timed_steps.py (torch's
# own FileTimerClient), the launchers taking turns REPEAT times:
#   hung  100 steps of 0.2 s, each ending in a Gloo all-reduce, under a 2 s timer; rank 1 hangs
#         in step 1 (so rank 0 waits in the all-reduce): seconds from its deadline to the
#         launcher's exit (the watchdog's reaction, its py-spy stack under dtrain, the job's
#         teardown), the exit status, the ranks still alive when the launcher exited and how
#         long the last of them lived on (up to 20 s; then killed);
#   kept  three 0.2 s steps under a 5 s timer: the launcher's wall time (what running each rank
#         under dtrain's watchdog adds to the start);
#   fast  STEPS steps of 2 ms, each under its own timer (an acquire and a release per step):
#         steps/s of rank 0 (500 at most), what the requests cost the rank;
#   flood STEPS steps of no work: steps/s of rank 0, or the exit status when the rank failed
#         (torch's client writes without blocking, so a server that drains the FIFO too slowly
#         fails the rank with BlockingIOError).
# Then the medians and dtrain's ratios to torchrun.
# Usage: bench/watchdog_timer.sh [BUILD_DIR] [REPEAT] [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
repeat=${2:-5}
steps=${3:-2000}
py=$root/.venv/bin/python
script=$root/tests/torchrun/timed_steps.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TORCHELASTIC_ENABLE_FILE_TIMER=1

# launch WHO JOB ARGS...: runs the script's two ranks under WHO, its output in $work/JOB.txt.
launch() {
  local who=$1 job=$2
  shift 2
  if [ "$who" = torchrun ]; then
    (cd "$work" && timeout 300 "$root/.venv/bin/torchrun" --standalone --nproc-per-node 2 \
      "$script" "$@" >"$work/$job.txt" 2>&1)
  else
    (cd "$work" && timeout 300 "$build/dtrain" launch -np 2 --log-dir "$work/logs" --job "$job" \
      -- "$py" "$script" "$@" >"$work/$job.txt" 2>&1)
  fi
}

# said JOB RANK PATTERN FIELD: field FIELD of the first line matching PATTERN that the rank wrote
# (torchrun's console, or dtrain's rank log).
said() {
  cat "$work/$1.txt" "$work/logs/$1/rank-$2.log" 2>/dev/null | grep -o "$3" | head -1 |
    awk -v f="$4" '{ print $f }' || true
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for n in $(seq 1 "$repeat"); do
  for who in torchrun dtrain; do
    status=0
    launch "$who" "hung-$who-$n" 2 1 0.2 100 allreduce || status=$?
    ended=$(date +%s.%N)
    left=$(pgrep -fc "$script 2 1 0.2 100 allreduce" || true)
    i=0
    while pgrep -f "$script 2 1 0.2 100 allreduce" >/dev/null && [ "$i" -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    lived=$(awk -v e="$ended" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - e }')
    pkill -9 -f "$script 2 1 0.2 100 allreduce" || true
    armed=$(said "hung-$who-$n" 1 'hung step armed at [0-9.]*' 5)
    echo "$who hung $(awk -v e="$ended" -v a="$armed" 'BEGIN { printf "%.2f", e - (a + 2) }') status=$status left=$left lived_s=$lived" | tee -a "$work/runs.txt"
    start=$(date +%s.%N)
    launch "$who" "kept-$who-$n" 5 0 0.2
    echo "$who kept $(awk -v e="$(date +%s.%N)" -v s="$start" 'BEGIN { printf "%.2f", e - s }')" | tee -a "$work/runs.txt"
    launch "$who" "fast-$who-$n" 5 0 0.002 "$steps"
    echo "$who fast $(said "fast-$who-$n" 0 'rank 0 done [0-9.]* steps/s' 4)" | tee -a "$work/runs.txt"
    status=0
    launch "$who" "flood-$who-$n" 5 0 0 "$steps" || status=$?
    rate=$(said "flood-$who-$n" 0 'rank 0 done [0-9.]* steps/s' 4)
    [ "$status" = 0 ] || rate="failed"
    why=$(grep -c BlockingIOError "$work/flood-$who-$n.txt" "$work"/logs/flood-$who-$n/rank-*.log 2>/dev/null | awk -F: '{ n += $NF } END { print n + 0 }') || true
    echo "$who flood $rate status=$status BlockingIOError_lines=$why" | tee -a "$work/runs.txt"
  done
done

echo
echo "medians of $repeat (hung: s from the deadline to the launcher's exit; kept: wall s; fast: steps/s)"
for kind in hung kept fast; do
  t=$(awk -v k="$kind" '$1 == "torchrun" && $2 == k { print $3 }' "$work/runs.txt" | median)
  d=$(awk -v k="$kind" '$1 == "dtrain" && $2 == k { print $3 }' "$work/runs.txt" | median)
  awk -v k="$kind" -v t="$t" -v d="$d" 'BEGIN { printf "%-5s torchrun %8.2f  dtrain %8.2f  dtrain/torchrun %.2f\n", k, t, d, d / t }'
done
for who in torchrun dtrain; do
  awk -v w="$who" '$1 == w && $2 == "hung" { sub("left=", "", $5); sub("lived_s=", "", $6); n++; l += $5; if ($6 > m) m = $6 }
    END { printf "hung  %-8s ranks alive at the launcher'"'"'s exit: %.1f per run; the last lived on up to %.1f s\n", w, l / n, m }' "$work/runs.txt"
done
for who in torchrun dtrain; do
  awk -v w="$who" -v r="$repeat" '$1 == w && $2 == "flood" { if ($3 == "failed") f++; else { ok++; s = s " " $3 } }
    END { printf "flood %-8s %d of %d runs failed; steps/s of the others:%s\n", w, f, r, s }' "$work/runs.txt"
done
