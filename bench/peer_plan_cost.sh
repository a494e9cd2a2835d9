#!/usr/bin/env bash
# What the peer test costs with every pair tested (the doctor, the checks before a start) and with
# the health watch's plan (each node connects to 4 partners a round, doctor/peer_plan.h), on N SSH
# nodes (network namespaces, tests/cluster/make-cluster.sh) with a second NIC each (hsn0, named by
# NCCL_SOCKET_IFNAME). Side by side in one run, alternating: `dtrain doctor` with every pair and
# with DTRAIN_PROBE_PEERS_PARTNERS=4, median of REPEAT runs each: the connections made, the test's
# own time (peer_connections.wall_s) and the CPU seconds the whole machine spent during the
# doctor's run (/proc/stat; the probe's other parts left out alike, so the difference is the
# test's), and the ratios. Then node1's switch port is taken off the bridge with its link up and
# the plan's test runs once more: the nodes it names. Needs root.
# Usage: bench/peer_plan_cost.sh [BUILD_DIR] [SIZES] [REPEAT]     e.g. bench/peer_plan_cost.sh build "16 32" 5
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
source "$src/bench/second_nics.sh"
build=$(cd "${1:-build}" && pwd)
sizes=${2:-16 32}
repeat=${3:-5}
dtrain=$build/dtrain
[ -x "$dtrain" ] || { echo "build it first: cmake --build $build --target dtrain" >&2; exit 2; }
work=$(mktemp -d /tmp/dtrain-bench-peer-plan.XXXXXX)
dir=$work/cluster
# The kernel's neighbour (ARP) table is one for every namespace here, limited to 1,024 entries
# (gc_thresh3); 32 namespace nodes that each reach every other on two interfaces of one bridge fill
# it, and the kernel drops connections ("neighbor table overflow"), which a cluster of machines,
# each with its own table, never sees. Raised while the bench runs, put back after.
thresholds=$(sysctl -n net.ipv4.neigh.default.gc_thresh1 net.ipv4.neigh.default.gc_thresh2 \
  net.ipv4.neigh.default.gc_thresh3 | tr '\n' ' ')
sysctl -q -w net.ipv4.neigh.default.gc_thresh1=8192 net.ipv4.neigh.default.gc_thresh2=16384 \
  net.ipv4.neigh.default.gc_thresh3=32768
restore() {
  read -r t1 t2 t3 <<<"$thresholds"
  sysctl -q -w net.ipv4.neigh.default.gc_thresh1="$t1" net.ipv4.neigh.default.gc_thresh2="$t2" \
    net.ipv4.neigh.default.gc_thresh3="$t3"
  bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap restore EXIT
mkdir -p "$work/project"
skip="python torch horovod py_spy clip gpu_health kernel_log pci rdzv nccl_lib"
hz=$(getconf CLK_TCK)

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# One doctor run with cluster file $1; prints "connections test_wall_s cpu_s named".
doctor_once() {
  local before after
  before=$(busy)
  # Exit status 1 when a check fails (the cut-off node): the JSON says which.
  bash "$src/tests/cluster/make-cluster.sh" exec "$dir" "$dtrain" doctor -c "$1" --json --timeout 120 \
    >"$work/doctor.json" 2>/dev/null || true
  after=$(busy)
  python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d.get("peer_connections", {})
named = sorted({n for f in d["findings"] if f["check"] == "peers" and f["severity"] == "error" for n in f["nodes"]})
made = p.get("connections_made", 0) + len(p.get("failed_connections", []))
print(made, p.get("wall_s", 0) if p.get("ran") else 0, (int(sys.argv[1]) - int(sys.argv[2])) / int(sys.argv[3]), ",".join(named) or "-")' \
    "$after" "$before" "$hz" <"$work/doctor.json"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); medians of $repeat alternating runs; probe parts left out on both sides: $skip"
printf '%-6s %11s %11s %8s %8s %7s %8s %8s %7s   %s\n' nodes conn_every conn_plan test_e_s test_p_s ratio cpu_e_s cpu_p_s ratio "node1 cut off: named"
for n in $sizes; do
  bash "$src/tests/cluster/make-cluster.sh" up "$n" "$dir" >/dev/null 2>&1
  head_ns=$(cat "$dir/head-netns")
  add_second_nics "$dir" "$n"
  base=$(cat "$dir/cluster.yaml"; echo "workdir: $work/project")
  printf '%s\nenv: {NCCL_SOCKET_IFNAME: hsn0, DTRAIN_PROBE_SKIP: "%s"}\n' "$base" "$skip" >"$work/every.yaml"
  printf '%s\nenv: {NCCL_SOCKET_IFNAME: hsn0, DTRAIN_PROBE_SKIP: "%s", DTRAIN_PROBE_PEERS_PARTNERS: 4}\n' \
    "$base" "$skip" >"$work/plan.yaml"
  doctor_once "$work/every.yaml" >/dev/null  # warm-up: page cache, ARP
  : >"$work/a"
  : >"$work/b"
  for ((r = 0; r < repeat; r++)); do
    doctor_once "$work/every.yaml" >>"$work/a"
    doctor_once "$work/plan.yaml" >>"$work/b"
  done
  named_e=$(awk '$4 != "-"' "$work/a" | wc -l)
  named_p=$(awk '$4 != "-"' "$work/b" | wc -l)
  [ "$named_e$named_p" = 00 ] ||
    echo "  healthy runs that named a node in the peer test: $named_e of $repeat with every pair" \
      "($(awk '$4 != "-" {print $4}' "$work/a" | tr '\n' ' ')), $named_p of $repeat with the plan"
  ip -n "$head_ns" link set sw1 nomaster
  read -r _ _ _ cut_named < <(doctor_once "$work/plan.yaml")
  ip -n "$head_ns" link set sw1 master br0
  ce=$(awk '{print $1}' "$work/a" | median); cp=$(awk '{print $1}' "$work/b" | median)
  te=$(awk '{print $2}' "$work/a" | median); tp=$(awk '{print $2}' "$work/b" | median)
  ue=$(awk '{print $3}' "$work/a" | median); up=$(awk '{print $3}' "$work/b" | median)
  printf '%-6s %11s %11s %8.2f %8.2f %7.2f %8.2f %8.2f %7.2f   %s\n' "$n" "$ce" "$cp" "$te" "$tp" \
    "$(echo "$tp / $te" | bc -l)" "$ue" "$up" "$(echo "$up / $ue" | bc -l)" "$cut_named"
  bash "$src/tests/cluster/make-cluster.sh" down "$dir" >/dev/null 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
