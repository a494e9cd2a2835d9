#!/usr/bin/env bash
# `dtrain launch -- true` over ssh against `pdsh -R ssh true` on the same namespace nodes (same
# client key, same known_hosts, strict host-key checking), 4, 16 and 32 nodes, side by side in
# one run. Prints, per size, the median wall time from start to every rank finished, the ratio
# (dtrain / pdsh: below 1 is faster), and the launching side's CPU time per node: dtrain's own
# process against pdsh plus the ssh client processes it starts. dtrain runs with
# --start-health-check off: the launch alone, as pdsh does it (the health check before the start
# is the doctor's fast checks, which bench/doctor.sh and bench/peer_plan_cost.sh measure). Needs
# root (network namespaces).
#
#   bench/ssh_launch.sh [BUILD_DIR] [REPEATS] [SIZES...]     e.g. bench/ssh_launch.sh build 3 4 16 32
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
repeats=${2:-3}
shift $(($# > 2 ? 2 : $#))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(4 16 32)
dtrain=$build/dtrain
[ -x "$dtrain" ] || { echo "ssh_launch: build dtrain first ($dtrain)" >&2; exit 2; }
command -v pdsh >/dev/null || { echo "ssh_launch: pdsh is not installed" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "ssh_launch: needs root (network namespaces, sshd)" >&2; exit 2; }
cluster=$here/../tests/cluster/make-cluster.sh
work=$(mktemp -d)
trap '"$cluster" down "$work/c" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# "wall user sys" in seconds for one command, run in the cluster's head namespace; user and sys
# include every child the command waited for (pdsh's ssh processes).
measure() {
  "$cluster" exec "$work/c" /usr/bin/time -f '%e %U %S' -o "$work/time" "$@" \
    >"$work/out" 2>&1 || { echo "ssh_launch: failed: $*" >&2; cat "$work/out" >&2; exit 1; }
  cat "$work/time"
}

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf '%-6s %12s %12s %8s %16s %16s %8s\n' nodes dtrain_wall_s pdsh_wall_s ratio \
  dtrain_cpu_ms/node pdsh_cpu_ms/node cpu_ratio
for n in "${sizes[@]}"; do
  "$cluster" up "$n" "$work/c" 1 2>/dev/null
  hosts=$(cut -d' ' -f2 "$work/c/nodes" | paste -sd,)
  export PDSH_SSH_ARGS_APPEND="-i $work/c/id_ed25519 -o UserKnownHostsFile=$work/c/known_hosts \
-o StrictHostKeyChecking=yes -o BatchMode=yes -o GlobalKnownHostsFile=/dev/null"
  : >"$work/d" && : >"$work/p"
  for r in $(seq 1 "$repeats"); do
    # Alternate which goes first so neither always meets a warmer machine.
    if [ $((r % 2)) -eq 1 ]; then
      measure "$dtrain" launch -q -c "$work/c/cluster.yaml" --log-dir "$work/logs" \
        --start-health-check off -- true >>"$work/d"
      measure pdsh -R ssh -l root -f 256 -w "$hosts" true >>"$work/p"
    else
      measure pdsh -R ssh -l root -f 256 -w "$hosts" true >>"$work/p"
      measure "$dtrain" launch -q -c "$work/c/cluster.yaml" --log-dir "$work/logs" \
        --start-health-check off -- true >>"$work/d"
    fi
  done
  dw=$(awk '{print $1}' "$work/d" | median)
  pw=$(awk '{print $1}' "$work/p" | median)
  dc=$(awk -v n="$n" '{print ($2 + $3) * 1000 / n}' "$work/d" | median)
  pc=$(awk -v n="$n" '{print ($2 + $3) * 1000 / n}' "$work/p" | median)
  awk -v n="$n" -v dw="$dw" -v pw="$pw" -v dc="$dc" -v pc="$pc" 'BEGIN {
    printf "%-6d %12.2f %12.2f %8.2f %16.1f %16.1f %8.2f\n", n, dw, pw, dw / pw, dc, pc,
      (pc > 0 ? dc / pc : 0) }'
  "$cluster" down "$work/c" >/dev/null 2>&1
done
echo "wall: median of $repeats runs each; cpu: user+sys of the launching side per node" \
  "(dtrain's process / pdsh with its ssh clients); GNU time resolution is 10 ms."
