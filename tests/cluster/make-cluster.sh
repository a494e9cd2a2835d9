#!/usr/bin/env bash
# A cluster of N SSH "nodes" on this machine, for tests and benchmarks. Needs root.
#
#   tests/cluster/make-cluster.sh up N DIR [SLOTS]   create N nodes (default 1 slot each)
#   tests/cluster/make-cluster.sh down DIR           remove them: sshd, namespaces, every process
#   tests/cluster/make-cluster.sh exec DIR CMD...    run CMD where the nodes are reachable
#   tests/cluster/make-cluster.sh node DIR I CMD...  run CMD inside node I (network, hostname, mounts)
#   tests/cluster/make-cluster.sh hide DIR I...      make nodes I... unreachable from the launcher;
#                                                    other nodes still reach them (bastion tests)
#
# Layout. Everything lives in network namespaces this script creates; the host's own network is
# never touched. A "head" namespace (dtc<id>-head) holds the bridge br0 with 10.231.0.1/24 and is
# where the launcher runs (`exec`). Node I is namespace dtc<id>-n<I> with eth0 = 10.231.0.<10+I>,
# its own hostname node<I> (UTS namespace) and a real OpenSSH sshd with its own host key, key-only
# auth, listening on its address, TCP forwarding allowed (any node can be a bastion). Each node
# has private storage at /srv/node: a tmpfs in the node's own mount namespace that neither this
# machine nor the other nodes see (a cluster without shared storage); the rest of the file
# system is this machine's. Inside a node this machine's ~/.bashrc reads as empty (a fresh
# machine's non-interactive PATH); set MAKE_CLUSTER_KEEP_BASHRC=1 to keep it. <id> is derived from DIR, so several clusters (different DIRs)
# coexist, each on its own private bridge.
#
# DIR receives:
#   cluster.yaml      transport: ssh, one entry per node, identity_file and known_hosts below
#   id_ed25519{,.pub} the client key (authorized on every node)
#   known_hosts       every node's host key, by address
#   nodes             one line per node: "<name> <address> <netns>"
#   head-netns        the namespace to run the launcher in
#   node<I>/          sshd config, host key, pid file and log of node I
#
# `up` first tears down whatever DIR held, so it is idempotent; `down` on a DIR that holds nothing
# succeeds. Up to 200 nodes.
set -euo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

cluster_id() {  # dtc + 6 hex digits of the DIR's absolute path
  local sum
  sum=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
  printf 'dtc%06x' $((sum % 16777216))
}

abs_dir() { mkdir -p "$1" && cd "$1" && pwd -P; }

down() {
  local dir=$1 id ns
  id=$(cluster_id "$dir")
  # Every process inside the nodes (sshd, sessions, leftovers of a job) goes. Processes in the
  # head namespace are the launcher's (perhaps our caller): they keep running, unreachable.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${id}-n" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  for f in "$dir"/node*/sshd.pid; do
    [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${id}-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$dir"/node[0-9]* "$dir"/cluster.yaml "$dir"/known_hosts "$dir"/nodes "$dir"/head-netns \
    "$dir"/authorized_keys "$dir"/id_ed25519 "$dir"/id_ed25519.pub "$dir"/empty-rc
}

write_sshd_config() {  # node_dir address
  cat >"$1/sshd_config" <<EOF
ListenAddress $2
Port 22
HostKey $1/ssh_host_ed25519_key
PidFile $1/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding yes
MaxSessions 64
MaxStartups 256
LoginGraceTime 30
LogLevel INFO
EOF
}

start_node() {  # index
  local i=$1 ns=$ID-n$1 addr=10.231.0.$((10 + $1)) nd=$DIR/node$1
  mkdir -p "$nd"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$HEAD" link add "nd$i" type veth peer name eth0 netns "$ns"
  ip -n "$HEAD" link set "nd$i" master br0 up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ssh-keygen -q -t ed25519 -N '' -C "node$i" -f "$nd/ssh_host_ed25519_key"
  write_sshd_config "$nd" "$addr"
  echo "$addr $(cut -d' ' -f1,2 "$nd/ssh_host_ed25519_key.pub")" >>"$DIR/known_hosts"
  echo "node$i $addr $ns" >>"$DIR/nodes"
  # setsid: sshd outlives this script and the caller's process group; its own UTS namespace
  # gives the node its hostname. Like a fresh machine, a node does not run this machine's
  # ~/.bashrc (which sshd's bash would source): it is masked in the node's mount namespace.
  local mask="" home
  home=$(getent passwd "$(id -un)" | cut -d: -f6)
  if [ -f "$home/.bashrc" ] && [ -z "${MAKE_CLUSTER_KEEP_BASHRC:-}" ]; then
    mask="mount --bind '$DIR/empty-rc' '$home/.bashrc' && "
  fi
  setsid ip netns exec "$ns" unshare --uts sh -c \
    "hostname node$i && mount -t tmpfs -o size=4g,mode=755 node$i-private /srv/node && \
     $mask exec /usr/sbin/sshd -D -f '$nd/sshd_config' -E '$nd/sshd.log'" \
    </dev/null >"$nd/start.log" 2>&1 &
}

wait_listening() {  # index
  local addr=10.231.0.$((10 + $1)) t
  for t in $(seq 1 100); do
    if ip netns exec "$HEAD" bash -c "exec 3<>/dev/tcp/$addr/22" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "make-cluster: sshd of node$1 ($addr) did not start; see $DIR/node$1/" >&2
  cat "$DIR/node$1/start.log" "$DIR/node$1/sshd.log" >&2 2>/dev/null || true
  return 1
}

write_cluster_file() {  # n slots
  {
    echo "# Generated by tests/cluster/make-cluster.sh: $1 nodes on a private bridge."
    echo "name: netns-$ID"
    echo "transport: ssh"
    echo "ssh:"
    echo "  user: root"
    echo "  identity_file: $DIR/id_ed25519"
    echo "  known_hosts: $DIR/known_hosts"
    echo "  host_key_policy: strict"
    echo "  connect_timeout: 5"
    echo "nodes:"
    local i
    for i in $(seq 0 $(($1 - 1))); do
      echo "  - {host: node$i, address: 10.231.0.$((10 + i)), slots: $2}"
    done
  } >"$DIR/cluster.yaml"
}

# The kernel has one IPv4 neighbour (ARP) table for the whole machine, every namespace's entries
# in it: N nodes that all talk to each other (the doctor's peer test) hold about (N+1)^2, and past
# gc_thresh3 (1024 by default, so from ~31 nodes) new peers cannot be resolved and connections
# time out ("neighbor table overflow!"). Raised where too low for N; never lowered.
raise_neighbour_limits() {  # n
  local need=$((4 * ($1 + 1) * ($1 + 1))) t=/proc/sys/net/ipv4/neigh/default
  [ -w "$t/gc_thresh3" ] || return 0
  if [ "$(cat "$t/gc_thresh3")" -lt "$need" ]; then
    echo "$need" >"$t/gc_thresh3"
    [ "$(cat "$t/gc_thresh2")" -ge $((need / 2)) ] || echo $((need / 2)) >"$t/gc_thresh2"
    echo "make-cluster: raised net.ipv4.neigh.default.gc_thresh3 to $need for $1 nodes" >&2
  fi
}

up() {
  local n=$1 slots=$2 i
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le 200 ]] || { echo "make-cluster: N must be 1..200" >&2; exit 2; }
  down "$DIR"
  raise_neighbour_limits "$n"
  mkdir -p /run/sshd  # sshd's privilege-separation directory
  mkdir -p /srv/node  # each node mounts its private tmpfs here, in its own mount namespace
  : >"$DIR/known_hosts"
  : >"$DIR/empty-rc"
  : >"$DIR/nodes"
  ssh-keygen -q -t ed25519 -N '' -C dtrain-test-client -f "$DIR/id_ed25519"
  cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
  ip netns add "$HEAD"
  ip -n "$HEAD" link set lo up
  # A MAC of its own: a bridge otherwise takes its ports' lowest, which changes when a port is
  # added or goes down (a test's second NIC), and the nodes' ARP entries for the head go stale.
  ip -n "$HEAD" link add br0 address 02:00:0a:e7:00:01 type bridge
  ip -n "$HEAD" addr add 10.231.0.1/24 dev br0
  ip -n "$HEAD" link set br0 up
  echo "$HEAD" >"$DIR/head-netns"
  for i in $(seq 0 $((n - 1))); do start_node "$i"; done
  for i in $(seq 0 $((n - 1))); do wait_listening "$i"; done
  write_cluster_file "$n" "$slots"
  echo "make-cluster: $n nodes up; run the launcher with: $0 exec $DIR CMD..." >&2
}

[ $# -ge 2 ] || usage
[ "$(id -u)" -eq 0 ] || { echo "make-cluster: needs root (network namespaces, sshd)" >&2; exit 77; }
cmd=$1
if [ "$cmd" = up ]; then
  [ $# -ge 3 ] || usage
  set -- up "$3" "$2" "${4:-1}"  # up N DIR [SLOTS] -> up DIR N SLOTS
fi
DIR=$(abs_dir "$2")
ID=$(cluster_id "$DIR")
HEAD=$ID-head
case "$cmd" in
  up) up "$3" "$4" ;;
  down) down "$DIR" ;;
  exec) [ $# -ge 3 ] || usage; shift 2; exec ip netns exec "$HEAD" "$@" ;;
  node) [ $# -ge 4 ] || usage; i=$3; shift 3
    pid=$(cat "$DIR/node$i/sshd.pid")
    exec nsenter -t "$pid" -n -u -m "$@" ;;
  hide) [ $# -ge 3 ] || usage; shift 2
    # The node drops every reply to the launcher's address: connections from the head time
    # out, connections from other nodes (10.231.0.10+) work.
    for i in "$@"; do ip -n "$ID-n$i" route add unreachable 10.231.0.1/32; done ;;
  *) usage ;;
esac
