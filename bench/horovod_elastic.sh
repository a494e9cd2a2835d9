#!/usr/bin/env bash
# Elastic Horovod next to horovodrun: the same hvd.elastic.run program
# (tests/horovod/hvd_elastic_train.py, 30 steps of HVD_TEST_STEP_S=0.2 s) on 3 sshd nodes in
# network namespaces (tests/cluster, root), one rank each, started from a fourth node (node3,
# which runs no rank) by `dtrain launch --min-np 2` and by `horovodrun -np 3 --min-np 2 -H ...`
# (Horovod 0.28.1 from .venv-horovod), alternated REPEAT times. At step 10 Horovod's rank 2 of
# the first round fails (horovodrun places ranks in an order of its own; dtrain's rank 2 is on
# node2):
#   kill  it SIGKILLs itself;
#   cut   its node's link goes down (`ip link set eth0 down`) until the run ended;
#   stop  its process gets SIGSTOP, as a hung one: it neither fails nor ends (dtrain runs with
#         --stall-timeout 8 --on-stall stop; horovodrun has no such watch);
#   back  it SIGKILLs itself, and its node comes back: both run with --blacklist-cooldown-range
#         1 2 (a 2 s cooldown) and 80 steps; what counts is the three ranks finishing together,
#         and the seconds from the fault to the first step of 3 ranks again.
# HOROVOD_GLOO_TIMEOUT_SECONDS=5 for both (how long a collective waits on a silent peer); dtrain
# runs with --node-timeout 3. Per run: whether the two other ranks went on and finished
# (`hvd-elastic-done ... same=1` twice), the seconds from the fault to their first step as a
# round of 2, the run's wall time and exit status; each run is cut off after LIMIT seconds.
# Then the medians side by side, and their ratio where both went on.
# Usage: bench/horovod_elastic.sh [BUILD_DIR] [REPEAT] [kill|cut|stop|back] [LIMIT]
# (env KEEP=DIR keeps every run's console output there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtrain=$(cd "${1:-build}" && pwd)/dtrain
repeat=${2:-3}
fault=${3:-kill}
limit=${4:-120}
python=$root/.venv-horovod/bin/python3
program=$root/tests/horovod/hvd_elastic_train.py
[ -x "$python" ] || { echo "no $python: run scripts/install-deps.sh --tests" >&2; exit 1; }
work=$(mktemp -d)
cluster=$work/cluster
cleanup() {
  pkill -9 -f "$program" 2>/dev/null || true
  pkill -9 -f "horovodrun -np 3" 2>/dev/null || true
  "$root/tests/cluster/make-cluster.sh" down "$cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$root/tests/cluster/make-cluster.sh" up 4 "$cluster" 1 >/dev/null
netns() { awk -v h="$1" '$1 == h { print $3 }' "$cluster/nodes"; }
hosts=$(awk 'NR <= 3 { printf "%s%s:1", (NR > 1 ? "," : ""), $2 }' "$cluster/nodes")
grep -v "node3" "$cluster/cluster.yaml" >"$work/cluster.yaml"  # the ranks' three nodes

# One run of TOOL (dtrain|horovodrun) as run N; prints "went_on recovered_s wall_s status".
run() {
  local tool=$1 n=$2 out=$work/$1-$2.txt
  local env=(HOROVOD_GLOO_TIMEOUT_SECONDS=5 HVD_TEST_STEP_S=0.2)
  local steps=30 size=2 back=()
  if [ "$fault" = back ]; then
    steps=80 size=3 back=(--blacklist-cooldown-range 1 2)
    env=(HOROVOD_GLOO_TIMEOUT_SECONDS=30 HVD_TEST_STEP_S=0.2 HVD_TEST_STEPS=$steps)
  fi
  { [ "$fault" = kill ] || [ "$fault" = back ]; } && env+=(HVD_TEST_DIE_RANK=2 HVD_TEST_DIE_STEP=10)
  local cmd
  if [ "$tool" = dtrain ]; then
    cmd=("$dtrain" launch -c "$work/cluster.yaml" --job "run-$n" --log-dir "$work/logs"
      --min-np 2 --node-timeout 3 --health-watch 0 --start-health-check off
      --restart-health-check off --grace-period 2 "${back[@]}" -- "$python" "$program")
    [ "$fault" = stop ] && cmd=("${cmd[@]:0:2}" --stall-timeout 8 --on-stall stop "${cmd[@]:2}")
    for e in "${env[@]}"; do cmd=("${cmd[@]:0:2}" -x "$e" "${cmd[@]:2}"); done
  else
    cmd=(env "${env[@]}" "$root/.venv-horovod/bin/horovodrun" -np 3 --min-np 2 -H "$hosts" -p 22
      -i "$cluster/id_ed25519" --gloo "${back[@]}" "$python" "$program")
  fi
  : >"$out"
  local cut_at="" start end status victim=""
  start=$(date +%s.%N)
  timeout -k 5 "$limit" "$root/tests/cluster/make-cluster.sh" node "$cluster" 3 "${cmd[@]}" \
    >"$out" 2>&1 &
  local pid=$!
  if [ "$fault" = cut ] || [ "$fault" = stop ]; then
    while kill -0 "$pid" 2>/dev/null; do
      if grep -q "hvd-step step=10 " "$out"; then
        local started
        started=$(grep -o "hvd-start rank=2 host=[a-z0-9]* pid=[0-9]*" "$out" | head -1)
        if [ "$fault" = cut ]; then
          victim=$(echo "$started" | sed 's/.*host=//; s/ .*//')
          ip netns exec "$(netns "$victim")" ip link set eth0 down
        else
          kill -STOP "${started##*pid=}"  # the nodes share this machine's process table
        fi
        cut_at=$(date +%s.%N)
        break
      fi
      sleep 0.02
    done
  fi
  status=0
  wait "$pid" || status=$?
  end=$(date +%s.%N)
  [ -n "$victim" ] && ip netns exec "$(netns "$victim")" ip link set eth0 up
  pkill -9 -f "$program" 2>/dev/null || true
  pkill -9 -f "horovodrun -np 3" 2>/dev/null || true
  local fault_at=$cut_at
  if [ "$fault" = kill ] || [ "$fault" = back ]; then
    fault_at=$( (grep -o "kills itself at step 10 t=[0-9.]*" "$out" || true) | head -1 | sed 's/.*t=//')
  fi
  local first=""
  if [ -n "$fault_at" ]; then  # the first step of a round of $size after the fault
    first=$( (grep -o "size=$size count=$size t=[0-9.]*" "$out" || true) | sed 's/.*t=//' |
      awk -v f="$fault_at" '$1 > f' | sort -n | head -1)
  fi
  local done_count
  done_count=$(grep -c "hvd-elastic-done step=$steps size=$size .* same=1" "$out" || true)
  local went_on=no recovered=-
  if [ "$done_count" = "$size" ] && [ -n "$first" ] && [ -n "$fault_at" ]; then
    went_on=yes
    recovered=$(awk -v a="$fault_at" -v b="$first" 'BEGIN { printf "%.2f", b - a }')
  fi
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$out" "$KEEP/$fault-$tool-$n.txt"
  printf '%s %s %.1f %s\n' "$went_on" "$recovered" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$status"
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
  print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

printf 'fault: %s at step 10 of Horovod rank 2 of 3 (one a node), %d run(s) each, cut off after %s s\n' \
  "$fault" "$repeat" "$limit"
printf '%-10s %3s %8s %12s %8s %7s\n' tool run went_on recovered_s wall_s status
for n in $(seq 1 "$repeat"); do
  for tool in dtrain horovodrun; do
    read -r went_on recovered wall status < <(run "$tool" "$n")
    printf '%-10s %3d %8s %12s %8s %7s\n' "$tool" "$n" "$went_on" "$recovered" "$wall" "$status"
    echo "$tool $went_on $recovered $wall" >>"$work/results"
  done
done
echo
for tool in dtrain horovodrun; do
  went=$(awk -v t=$tool '$1 == t && $2 == "yes"' "$work/results" | wc -l)
  rec=$(awk -v t=$tool '$1 == t && $2 == "yes" { print $3 }' "$work/results" | median)
  wall=$(awk -v t=$tool '$1 == t { print $4 }' "$work/results" | median)
  printf '%-10s went on in %d of %d; median recovered_s %s, median wall_s %s\n' "$tool" "$went" \
    "$repeat" "$rec" "$wall"
  eval "rec_$tool=$rec"
done
if [ "$rec_dtrain" != - ] && [ "$rec_horovodrun" != - ]; then
  awk -v d="$rec_dtrain" -v h="$rec_horovodrun" \
    'BEGIN { printf "recovered_s ratio dtrain/horovodrun: %.2f\n", d / h }'
fi
