#!/usr/bin/env bash
# `dtrain doctor --bandwidth` on 4, 16 and 64 SSH nodes (network namespaces on this machine,
# tests/cluster/make-cluster.sh), with node 1's link throttled by `tc ... tbf rate RATE` on both
# ends of its veth: the wall time of the bandwidth test (the doctor with and without
# --bandwidth, side by side), which nodes it names (node1 and only it is right), and what node1's
# pairs measured against the rate tc set. Needs root, dtrain and dtrain-clip built.
# Usage: bench/doctor_bandwidth.sh [BUILD_DIR] [SIZES] [RATE_MBIT] [MIB]
#        e.g. bench/doctor_bandwidth.sh build "4 16 64" 200 4
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
sizes=${2:-4 16 64}
rate=${3:-200}
mib=${4:-4}
dtrain=$build/dtrain
[ -x "$dtrain" ] && [ -x "$build/dtrain-clip" ] ||
  { echo "build it first: cmake --build $build --target dtrain dtrain-clip" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "bench/doctor_bandwidth.sh: needs root (namespaces)" >&2; exit 2; }
work=$(mktemp -d /tmp/dtrain-bench-bandwidth.XXXXXX)
dir=$work/cluster
cluster=$src/tests/cluster/make-cluster.sh
trap '"$cluster" down "$dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

now() { date +%s.%N; }
printf '%-6s %-10s %-10s %-10s %-22s %-14s %-14s %s\n' nodes doctor_s with_bw_s bw_s named \
  node1_pairs_MBps tc_MBps other_pairs_MBps_min
for n in $sizes; do
  "$cluster" up "$n" "$dir" >/dev/null
  head=$(cat "$dir/head-netns")
  ns1=$(sed -n '2p' "$dir/nodes" | cut -d' ' -f3)
  tbf="root tbf rate ${rate}mbit burst 256kbit latency 100ms"
  ip netns exec "$head" tc qdisc add dev nd1 $tbf
  ip netns exec "$ns1" tc qdisc add dev eth0 $tbf
  t0=$(now)
  "$cluster" exec "$dir" "$dtrain" doctor -c "$dir/cluster.yaml" --timeout 60 --json \
    >"$work/plain.json" 2>/dev/null || true
  t1=$(now)
  "$cluster" exec "$dir" "$dtrain" doctor -c "$dir/cluster.yaml" --timeout 60 --json \
    --bandwidth --bandwidth-mib "$mib" >"$work/bw.json" 2>"$work/bw.err" || true
  t2=$(now)
  python3 - "$work/bw.json" "$n" "$t0" "$t1" "$t2" "$rate" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
n, t0, t1, t2, rate = sys.argv[2], *map(float, sys.argv[3:7])
plain, withbw = t1 - t0, t2 - t1
bw = doc.get("bandwidth", {})
named = ",".join(bw.get("slow_nodes", []) + ["-".join(l) for l in bw.get("slow_links", [])]) or "none"
mine, others = [], []
for f in bw.get("figures", []):
    if f["kind"] != "pair":
        continue
    (mine if "node1" in f["nodes"] else others).append(f["busbw_gbs"] * 1000)
print("%-6s %-10.1f %-10.1f %-10.1f %-22s %-14s %-14.1f %s" % (
    n, plain, withbw, withbw - plain, named, "/".join("%.1f" % v for v in mine) or "-",
    rate / 8, "%.0f" % min(others) if others else "-"))
PY
  "$cluster" down "$dir" >/dev/null
done
