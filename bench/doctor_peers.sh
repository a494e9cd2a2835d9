#!/usr/bin/env bash
# What the doctor's peer test (every node connects to every other at the addresses the job's
# collectives use, dtrain-doctor(1) `peers`) costs, and how soon it names a node cut off, on N SSH
# nodes (network namespaces, tests/cluster/make-cluster.sh) with a second NIC each (hsn0, named by
# NCCL_SOCKET_IFNAME). Side by side in one run, alternating: `dtrain doctor` with the test and
# with it left out (DTRAIN_PROBE_SKIP=peers), median of REPEAT runs each, and the ratio; the test's
# own time (peer_connections.wall_s). Then node1's switch port is taken off the bridge with its
# link up (a port in the wrong VLAN) and the doctor runs again: its time, and the nodes it names.
# The probe's slow parts that have nothing to do with the network (the torch import, dtrain-clip's
# start) are left out on both sides alike. Needs root.
# Usage: bench/doctor_peers.sh [BUILD_DIR] [SIZES] [REPEAT]     e.g. bench/doctor_peers.sh build "4 16" 5
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
source "$src/bench/second_nics.sh"
build=$(cd "${1:-build}" && pwd)
sizes=${2:-4 16}
repeat=${3:-5}
dtrain=$build/dtrain
[ -x "$dtrain" ] || { echo "build it first: cmake --build $build --target dtrain" >&2; exit 2; }
work=$(mktemp -d /tmp/dtrain-bench-peers.XXXXXX)
dir=$work/cluster
trap 'bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$work/project"
skip="python torch horovod py_spy clip"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# One doctor run with cluster file $1; prints "summary_wall_s peers_wall_s errors named".
doctor_once() {
  # Exit status 1 when a check fails (the cut-off node): the JSON says which.
  bash "$src/tests/cluster/make-cluster.sh" exec "$dir" "$dtrain" doctor -c "$1" --json --timeout 120 \
    >"$work/doctor.json" 2>/dev/null || true
  python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d.get("peer_connections", {})
named = sorted({n for f in d["findings"] if f["check"] == "peers" and f["severity"] == "error" for n in f["nodes"]})
print(d["summary"]["wall_s"], p.get("wall_s", 0) if p.get("ran") else 0, d["summary"]["errors"], ",".join(named) or "-")' <"$work/doctor.json"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); medians of $repeat alternating runs; probe parts left out on both sides: $skip"
printf '%-6s %12s %12s %7s %10s   %14s %s\n' nodes with_s without_s ratio test_s cut_off_s named
for n in $sizes; do
  bash "$src/tests/cluster/make-cluster.sh" up "$n" "$dir" >/dev/null 2>&1
  head_ns=$(cat "$dir/head-netns")
  add_second_nics "$dir" "$n"
  base=$(cat "$dir/cluster.yaml"; echo "workdir: $work/project")
  printf '%s\nenv: {NCCL_SOCKET_IFNAME: hsn0, DTRAIN_PROBE_SKIP: "%s"}\n' "$base" "$skip" >"$work/with.yaml"
  printf '%s\nenv: {NCCL_SOCKET_IFNAME: hsn0, DTRAIN_PROBE_SKIP: "%s peers"}\n' "$base" "$skip" >"$work/without.yaml"
  doctor_once "$work/with.yaml" >/dev/null  # warm-up: page cache, ARP
  : >"$work/a"
  : >"$work/b"
  for ((r = 0; r < repeat; r++)); do
    doctor_once "$work/with.yaml" >>"$work/a"
    doctor_once "$work/without.yaml" >>"$work/b"
  done
  with=$(awk '{print $1}' "$work/a" | median)
  without=$(awk '{print $1}' "$work/b" | median)
  test_s=$(awk '{print $2}' "$work/a" | median)
  named=$(awk '$4 != "-"' "$work/a" "$work/b" | wc -l)
  [ "$named" = 0 ] || echo "  ($named healthy run(s) named a node in the peer test)"
  ip -n "$head_ns" link set sw1 nomaster
  read -r cut_wall _ _ named < <(doctor_once "$work/with.yaml")
  ip -n "$head_ns" link set sw1 master br0
  printf '%-6s %12.2f %12.2f %7.2f %10.2f   %14.2f %s\n' "$n" "$with" "$without" \
    "$(echo "$with / $without" | bc -l)" "$test_s" "$cut_wall" "$named"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
