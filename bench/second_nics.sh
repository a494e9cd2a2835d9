# Sourced by the benches of the peer test (doctor_peers.sh, peer_plan_cost.sh): gives each of the
# N namespace nodes of the cluster in DIR (tests/cluster/make-cluster.sh) a second interface, hsn0,
# 10.232.x.y/16, on the cluster's bridge through a switch port sw<i> in the head namespace (what
# NCCL_SOCKET_IFNAME=hsn0 names; `ip -n HEAD link set sw1 nomaster` takes node1 off the bridge).
# Usage: add_second_nics DIR N
add_second_nics() {
  local dir=$1 n=$2 head_ns ns i
  head_ns=$(cat "$dir/head-netns")
  for ((i = 0; i < n; i++)); do
    ns=$(awk -v i=$((i + 1)) 'NR == i {print $3}' "$dir/nodes")
    ip -n "$head_ns" link add "sw$i" type veth peer name hsn0 netns "$ns"
    ip -n "$head_ns" link set "sw$i" master br0 up
    ip -n "$ns" addr add "10.232.$((i / 200)).$((10 + i % 200))/16" dev hsn0
    ip -n "$ns" link set hsn0 up
  done
}
