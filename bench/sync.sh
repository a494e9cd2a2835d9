#!/usr/bin/env bash
# `dtrain sync` against `rsync -a` over ssh to every node in parallel (one rsync + ssh per node,
# same client key, same known_hosts, strict host-key checking), on namespace nodes whose
# destination is their private tmpfs (/srv/node). A tree of FILES files totalling MB megabytes
# (100 folders, random bytes) is synced twice per tool: first to empty nodes, then after one
# file changed. Prints per size and run: wall time of each tool, the ratio (dtrain / rsync:
# below 1 is faster) and the launching side's CPU per node (dtrain's process; rsync plus its
# ssh processes). Needs root (network namespaces).
#
#   bench/sync.sh [BUILD_DIR] [FILES] [MB] [SIZES...]     e.g. bench/sync.sh build 10000 200 4 16
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
files=${2:-10000}
mb=${3:-200}
shift $(($# > 3 ? 3 : $#))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(4 16)
dtrain=$build/dtrain
[ -x "$dtrain" ] || { echo "sync: build dtrain first ($dtrain)" >&2; exit 2; }
command -v rsync >/dev/null || { echo "sync: rsync is not installed (scripts/install-deps.sh --tests)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "sync: needs root (network namespaces, sshd)" >&2; exit 2; }
cluster=$here/../tests/cluster/make-cluster.sh
work=$(mktemp -d /tmp/sync-bench.XXXX)
trap '"$cluster" down "$work/c" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# The tree: files spread over 100 folders, sizes equal, contents random.
tree=$work/tree
per_file=$((mb * 1000000 / files))
for d in $(seq 0 99); do mkdir -p "$tree/d$d"; done
head -c $((per_file * files)) /dev/urandom | split -a 5 -d -b "$per_file" - "$work/part."
i=0
for f in "$work"/part.*; do mv "$f" "$tree/d$((i % 100))/f$i.bin"; i=$((i + 1)); done

measure() {  # "wall user sys" for one command in the head namespace, children included
  (cd "$tree" && "$cluster" exec "$work/c" /usr/bin/time -f '%e %U %S' -o "$work/time" "$@") \
    >"$work/out" 2>&1 || { echo "sync: failed: $*" >&2; cat "$work/out" >&2; exit 1; }
  cat "$work/time"
}

printf '%-6s %-8s %10s %10s %7s %18s %18s\n' nodes run dtrain_s rsync_s ratio \
  dtrain_cpu_ms/node rsync_cpu_ms/node
for n in "${sizes[@]}"; do
  "$cluster" up "$n" "$work/c" 1 2>/dev/null
  cp "$work/c/cluster.yaml" "$work/sync.yaml"
  echo "workdir: /srv/node/bench-dtrain" >>"$work/sync.yaml"
  ssh_cmd="ssh -i $work/c/id_ed25519 -o UserKnownHostsFile=$work/c/known_hosts \
-o StrictHostKeyChecking=yes -o BatchMode=yes -o GlobalKnownHostsFile=/dev/null"
  rsync_all="for a in $(cut -d' ' -f2 "$work/c/nodes" | tr '\n' ' '); do \
rsync -a -e '$ssh_cmd' ./ root@\$a:/srv/node/bench-rsync/ & done; wait"
  for run in first changed; do
    if [ "$run" = changed ]; then
      head -c 1000 /dev/urandom >>"$tree/d7/f7.bin"
    fi
    read -r dw du ds < <(measure "$dtrain" sync -c "$work/sync.yaml")
    read -r rw ru rs < <(measure sh -c "$rsync_all")
    awk -v n="$n" -v run="$run" -v dw="$dw" -v du="$du" -v ds="$ds" -v rw="$rw" -v ru="$ru" \
      -v rs="$rs" 'BEGIN { printf "%-6d %-8s %10.2f %10.2f %7.2f %18.0f %18.0f\n", n, run, dw,
        rw, dw / rw, (du + ds) * 1000 / n, (ru + rs) * 1000 / n }'
  done
  # Both tools left identical trees on every node.
  for i in $(seq 0 $((n - 1))); do
    "$cluster" node "$work/c" "$i" sh -c 'diff -r -x ".dtrain-sync-manifest" \
      /srv/node/bench-dtrain /srv/node/bench-rsync' || { echo "sync: node$i differs" >&2; exit 1; }
  done
  "$cluster" down "$work/c" 2>/dev/null
done
