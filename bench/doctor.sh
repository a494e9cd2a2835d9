#!/usr/bin/env bash
# dtrain doctor's wall time on 4, 16 and 32 SSH nodes (network namespaces on this machine,
# tests/cluster/make-cluster.sh), side by side in the same run with the same probe script
# (templates/probe.sh) run through `pdsh -R ssh`, and the ratio; then, on one node, the bare
# probe (`sh -s < probe.sh`) against `dtrain doctor` with the local transport: the doctor's
# overhead. The two sides alternate run by run (doctor, pdsh, doctor, ...) so that a change in
# the machine's load weighs on both alike; each figure is the median of REPEAT runs.
#
# Where the kernel offers CPU accounting (cgroup v1 cpuacct or cgroup v2), it also prints the CPU
# seconds each side used per run: on the launching side (the tool and every process it started
# here) and on the nodes (every process their sshd started). On a machine shared with other work
# the CPU seconds vary less than the wall time. Needs root (namespaces, sshd) and pdsh.
# Usage: bench/doctor.sh [BUILD_DIR] [SIZES] [REPEAT]     e.g. bench/doctor.sh build "4 16 32" 3
# DTRAIN_PROBE_SKIP (e.g. "python clip") leaves those probe parts out on every side alike, to see
# the tools' own cost without the torch import and the dtrain-clip start. The doctor's peer test,
# which pdsh has no counterpart of, is left out (bench/doctor_peers.sh measures it).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
sizes=${2:-4 16 32}
repeat=${3:-3}
dtrain=$build/dtrain
probe=$(mktemp)  # the probe as the doctor sends it: the program lookup, then the probe
cat "$src/templates/dtrain_program.sh" "$src/templates/probe.sh" >"$probe"
[ -x "$dtrain" ] || { echo "build it first: cmake --build $build --target dtrain" >&2; exit 2; }
command -v pdsh >/dev/null || { echo "bench/doctor.sh: needs pdsh" >&2; exit 2; }
work=$(mktemp -d /tmp/dtrain-bench-doctor.XXXXXX)
dir=$work/cluster

# CPU accounting: two cgroups, "tool" (the side being timed) and "nodes" (every node's sshd).
cg=""
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup/dtrain-bench-doctor.$$
  cpu_used() { awk '$1 == "usage_usec" {print $2 / 1e6}' "$cg/$1/cpu.stat"; }
elif [ -d /sys/fs/cgroup/cpuacct ]; then
  cg=/sys/fs/cgroup/cpuacct/dtrain-bench-doctor.$$
  cpu_used() { awk '{print $1 / 1e9}' "$cg/$1/cpuacct.usage"; }
fi
if [ -n "$cg" ] && ! mkdir -p "$cg/tool" "$cg/nodes" 2>/dev/null; then cg=""; fi
cg_leave() {  # moves whatever is left in our cgroups back to the root one, then removes them
  [ -n "$cg" ] || return 0
  local g p
  for g in tool nodes; do
    [ -d "$cg/$g" ] || continue
    for p in $(cat "$cg/$g/cgroup.procs" 2>/dev/null); do echo "$p" >"$cg/../cgroup.procs" 2>/dev/null || true; done
    rmdir "$cg/$g" 2>/dev/null || true
  done
  rmdir "$cg" 2>/dev/null || true
}
trap 'bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true; cg_leave; rm -rf "$work"' EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# Runs "$@" once in the tool cgroup; appends "wall local_cpu node_cpu" to the file $out.
run_once() {
  local out=$1 t0 t1 l0 l1 n0 n1
  shift
  l0=$( [ -n "$cg" ] && cpu_used tool || echo 0); n0=$( [ -n "$cg" ] && cpu_used nodes || echo 0)
  t0=$(now)
  ( [ -n "$cg" ] && echo "$BASHPID" >"$cg/tool/cgroup.procs"; "$@" >/dev/null 2>&1 || true )
  t1=$(now)
  l1=$( [ -n "$cg" ] && cpu_used tool || echo 0); n1=$( [ -n "$cg" ] && cpu_used nodes || echo 0)
  echo "$(echo "$t1 - $t0" | bc -l) $(echo "$l1 - $l0" | bc -l) $(echo "$n1 - $n0" | bc -l)" >>"$out"
}
# Alternates A and B REPEAT times; results in $work/a and $work/b.
alternate() {
  local a=$1 b=$2 i
  : >"$work/a"
  : >"$work/b"
  for ((i = 0; i < repeat; i++)); do
    run_once "$work/a" "$a"
    run_once "$work/b" "$b"
  done
}
column() { awk -v c="$2" '{print $c}' "$1" | median; }
cpu_total() { awk '{print $2 + $3}' "$1" | median; }

mkdir -p "$work/project"
# The doctor checks everything: GPUs, toolkit, Python imports, the rendezvous port. pdsh runs the
# same script with the same environment, and gets the same rendezvous listener on node 0 (the
# probe in listen mode, started the way the doctor starts it); both send it to `sh` everywhere.
port=29641
# DTRAIN_PROBE_CLIP_DIR as the doctor sets it: the probe runs `dtrain-clip --version` (which loads
# LibTorch, ~0.5 s of CPU), so the bare probe and pdsh must do that too for a like-for-like figure.
skip=${DTRAIN_PROBE_SKIP:-}
export DTRAIN_PROBE_SKIP=$skip  # the bare probe's
probe_env="DTRAIN_PROBE_WORKDIR=$work/project DTRAIN_PROBE_RDZV_ADDR=10.231.0.10 DTRAIN_PROBE_RDZV_PORT=$port DTRAIN_PROBE_CLIP_DIR=$build DTRAIN_PROBE_SKIP='$skip'"
# A --timeout far above any run's length: on a loaded machine the default 30 s could cut a large
# cluster's run short, and a doctor that gives up is not a faster one.
doctor_on() {
  bash "$src/tests/cluster/make-cluster.sh" exec "$dir" "$dtrain" doctor -c "$cfg" --timeout 600
}
pdsh_on() {
  local listener
  bash "$src/tests/cluster/make-cluster.sh" node "$dir" 0 env DTRAIN_PROBE_MODE=listen \
    DTRAIN_PROBE_RDZV_PORT=$port DTRAIN_PROBE_LISTEN_S=120 sh -s <"$probe" >/dev/null 2>&1 &
  listener=$!
  bash "$src/tests/cluster/make-cluster.sh" exec "$dir" env \
    PDSH_SSH_ARGS="-i $dir/id_ed25519 -o UserKnownHostsFile=$dir/known_hosts -o BatchMode=yes -x -l%u %h" \
    pdsh -R ssh -l root -f 256 -w "$hosts" "env $probe_env sh $probe"
  kill "$listener" 2>/dev/null || true
  wait "$listener" 2>/dev/null || true
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); medians of $repeat alternating runs${skip:+; probe parts left out: $skip}"
if [ -n "$cg" ]; then
  printf '%-6s %10s %10s %7s   %13s %13s %7s\n' nodes doctor_s pdsh_s ratio doctor_cpu_s pdsh_cpu_s \
    ratio
else
  printf '%-6s %10s %10s %7s\n' nodes doctor_s pdsh_s ratio
fi
for n in $sizes; do
  bash "$src/tests/cluster/make-cluster.sh" up "$n" "$dir" >/dev/null 2>&1
  if [ -n "$cg" ]; then
    for f in "$dir"/node*/sshd.pid; do cat "$f" >"$cg/nodes/cgroup.procs"; done
  fi
  cfg=$dir/bench.yaml
  { cat "$dir/cluster.yaml"; echo "workdir: $work/project"; echo "rendezvous: {port: $port}"
    echo "job: {command: [python3, x.py]}"; echo "env: {DTRAIN_PROBE_SKIP: \"$skip peers\"}"; } >"$cfg"
  hosts=$(awk '{print $2}' "$dir/nodes" | paste -sd, -)
  # One warm-up of each, so that the page cache holds the same files for both.
  doctor_on >/dev/null 2>&1 || true
  pdsh_on >/dev/null 2>&1 || true
  alternate doctor_on pdsh_on
  d=$(column "$work/a" 1)
  p=$(column "$work/b" 1)
  if [ -n "$cg" ]; then
    dc=$(cpu_total "$work/a")
    pc=$(cpu_total "$work/b")
    printf '%-6s %10.3f %10.3f %7.2f   %13.2f %13.2f %7.2f\n' "$n" "$d" "$p" \
      "$(echo "$d / $p" | bc -l)" "$dc" "$pc" "$(echo "$dc / $pc" | bc -l)"
  else
    printf '%-6s %10.3f %10.3f %7.2f\n' "$n" "$d" "$p" "$(echo "$d / $p" | bc -l)"
  fi
done
bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true

# One node, this machine: the bare probe against the doctor running it via the local transport.
cat >"$work/local.yaml" <<YAML
transport: local
nodes: [{host: here, address: 127.0.0.1}]
rendezvous: {port: 29631}
workdir: $work/project
job: {command: [python3, x.py]}
env: {DTRAIN_PROBE_SKIP: "$skip"}
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
bare_probe >/dev/null 2>&1 || true
doctor_local >/dev/null 2>&1 || true
# Single runs of about a second vary most with the load: three times as many of them.
repeat=$((repeat * 3))
alternate bare_probe doctor_local
kill "$listener" 2>/dev/null || true
b=$(column "$work/a" 1)
l=$(column "$work/b" 1)
echo
printf 'one node (median of %d): bare probe %.3f s, dtrain doctor (local transport) %.3f s, overhead %.0f ms\n' \
  "$repeat" "$b" "$l" "$(echo "($l - $b) * 1000" | bc -l)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
