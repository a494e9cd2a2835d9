#!/usr/bin/env bash
# dtrain doctor's wall time on 4, 16 and 32 SSH nodes (network namespaces on this machine,
# tests/cluster/make-cluster.sh), side by side in the same run with the same probe script
# (templates/probe.sh) run through `pdsh -R ssh`, and the ratio; then, on one node, the bare
# probe (`sh -s < probe.sh`) against `dtrain doctor` with the local transport: the doctor's
# overhead. Each figure is the median of REPEAT runs. Needs root (namespaces, sshd) and pdsh.
# Usage: bench/doctor.sh [BUILD_DIR] [SIZES] [REPEAT]     e.g. bench/doctor.sh build "4 16 32" 3
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
sizes=${2:-4 16 32}
repeat=${3:-3}
dtrain=$build/dtrain
probe=$src/templates/probe.sh
[ -x "$dtrain" ] || { echo "build it first: cmake --build $build --target dtrain" >&2; exit 2; }
command -v pdsh >/dev/null || { echo "bench/doctor.sh: needs pdsh" >&2; exit 2; }
work=$(mktemp -d /tmp/dtrain-bench-doctor.XXXXXX)
dir=$work/cluster
trap 'bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# Runs "$@" REPEAT times and prints the median wall time in seconds.
timed() {
  local i t0 t1
  for ((i = 0; i < repeat; i++)); do
    t0=$(now)
    "$@" >/dev/null 2>&1 || true
    t1=$(now)
    echo "$t1 - $t0" | bc -l
  done | median
}

mkdir -p "$work/project"
# The doctor checks everything: GPUs, toolkit, Python imports, the rendezvous port. pdsh runs the
# same script with the same environment, and gets the same rendezvous listener on node 0 (the
# probe in listen mode, started the way the doctor starts it); both send it to `sh` everywhere.
port=29641
# DTRAIN_PROBE_CLIP_DIR as the doctor sets it: the probe runs `dtrain-clip --version` (which loads
# LibTorch, ~0.6 s), so the bare probe and pdsh must do that too for a like-for-like figure.
probe_env="DTRAIN_PROBE_WORKDIR=$work/project DTRAIN_PROBE_RDZV_ADDR=10.231.0.10 DTRAIN_PROBE_RDZV_PORT=$port DTRAIN_PROBE_CLIP_DIR=$build"
doctor_on() { bash "$src/tests/cluster/make-cluster.sh" exec "$dir" "$dtrain" doctor -c "$1"; }
pdsh_on() {
  local listener
  bash "$src/tests/cluster/make-cluster.sh" node "$dir" 0 env DTRAIN_PROBE_MODE=listen \
    DTRAIN_PROBE_RDZV_PORT=$port DTRAIN_PROBE_LISTEN_S=120 sh -s <"$probe" >/dev/null 2>&1 &
  listener=$!
  bash "$src/tests/cluster/make-cluster.sh" exec "$dir" env \
    PDSH_SSH_ARGS="-i $dir/id_ed25519 -o UserKnownHostsFile=$dir/known_hosts -o BatchMode=yes -x -l%u %h" \
    pdsh -R ssh -l root -f 256 -w "$1" "env $probe_env sh $probe"
  kill "$listener" 2>/dev/null || true
  wait "$listener" 2>/dev/null || true
}

printf '%-6s %12s %12s %14s\n' nodes doctor_s pdsh_s doctor/pdsh
for n in $sizes; do
  bash "$src/tests/cluster/make-cluster.sh" up "$n" "$dir" >/dev/null 2>&1
  cfg=$dir/bench.yaml
  { cat "$dir/cluster.yaml"; echo "workdir: $work/project"; echo "rendezvous: {port: $port}"
    echo "job: {command: [python3, x.py]}"; } >"$cfg"
  hosts=$(awk '{print $2}' "$dir/nodes" | paste -sd, -)
  # One warm-up of each, so that the page cache holds the same files for both.
  doctor_on "$cfg" >/dev/null 2>&1 || true
  pdsh_on "$hosts" >/dev/null 2>&1 || true
  d=$(timed doctor_on "$cfg")
  p=$(timed pdsh_on "$hosts")
  printf '%-6s %12.3f %12.3f %14.2f\n' "$n" "$d" "$p" "$(echo "$d / $p" | bc -l)"
done
bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true

# One node, this machine: the bare probe against the doctor running it via the local transport.
cat >"$work/local.yaml" <<YAML
transport: local
nodes: [{host: here, address: 127.0.0.1}]
rendezvous: {port: 29631}
workdir: $work/project
job: {command: [python3, x.py]}
YAML
bare_probe() {
  env DTRAIN_PROBE_WORKDIR="$work/project" DTRAIN_PROBE_RDZV_ADDR=127.0.0.1 \
    DTRAIN_PROBE_RDZV_PORT=29632 DTRAIN_PROBE_CLIP_DIR="$build" sh -s <"$probe"
}
# The bare probe's rendezvous test needs a listener too, as the doctor starts one.
env DTRAIN_PROBE_MODE=listen DTRAIN_PROBE_RDZV_PORT=29632 DTRAIN_PROBE_LISTEN_S=600 \
  sh -s <"$probe" >/dev/null 2>&1 &
listener=$!
sleep 0.5
doctor_local() { "$dtrain" doctor -c "$work/local.yaml"; }
b=$(timed bare_probe)
l=$(timed doctor_local)
kill "$listener" 2>/dev/null || true
echo
printf 'one node: bare probe %.3f s, dtrain doctor (local transport) %.3f s, overhead %.0f ms\n' \
  "$b" "$l" "$(echo "($l - $b) * 1000" | bc -l)"
