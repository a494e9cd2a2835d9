#!/usr/bin/env bash
# What fetching a trace from an ssh node costs: one namespace node (tests/cluster) with a private
# tmpfs over the job's log folder runs a 1-rank job that leaves an MB-megabyte trace there; then
# `dtrain timeline` fetches and merges it, `dtrain timeline --no-fetch` merges the fetched copy
# alone (the difference is the fetch), and OpenSSH's `ssh node cat` copies the same file, side by
# side. Peak memory shows the fetch streams. Needs root.
#
#   bench/timeline_fetch.sh [BUILD_DIR] [MB]      defaults: build 300
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
mb=${2:-300}
src=$(cd "$(dirname "$0")/.." && pwd)
dtrain=$build/dtrain
[ -x "$dtrain" ] || { echo "no $dtrain: build the dtrain target first" >&2; exit 2; }
dir=$build/bench-clusters/timeline-fetch
cluster=$src/tests/cluster/make-cluster.sh
logs=$dir/logs
trap '"$cluster" down "$dir" >/dev/null 2>&1; rm -rf "$logs" "$dir/trace.json" "$dir/copy.json"' EXIT
"$cluster" up 1 "$dir" 1 2>/dev/null
rm -rf "$logs"
mkdir -p "$logs"
nsenter -t "$(cat "$dir/node0/sshd.pid")" -m mount -t tmpfs tmpfs "$logs"

# The trace: a header, then B/E pairs up to MB megabytes (written once, copied by the rank).
awk -v bytes=$((mb * 1000000)) 'BEGIN {
  printf "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"rank 0\", \"start_time_since_epoch_in_micros\": 1763800000000000, \"rank\": 0, \"host\": \"node0\"}}"
  n = 0; t = 0
  while (n < bytes) {
    s = sprintf(",\n{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": %d, \"pid\": 1, \"args\": {\"bytes\": 1048576}},\n{\"ph\": \"E\", \"name\": \"ALLREDUCE\", \"ts\": %d, \"pid\": 1}", t, t + 5)
    printf "%s", s; n += length(s); t += 10
  }
  printf "\n]\n" }' >"$dir/trace.json"
"$cluster" exec "$dir" "$dtrain" launch -c "$dir/cluster.yaml" --log-dir "$logs" --job big \
  --timeline -q -- sh -c 'mkdir -p "$(dirname "$DTRAIN_TIMELINE")" && cp "$0" "$DTRAIN_TIMELINE"' \
  "$dir/trace.json"
bytes=$(wc -c <"$dir/trace.json")
echo "trace: $((bytes / 1000000)) MB on node0 only; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

measure() {  # label command...
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$dir/time" "$@" >/dev/null 2>"$dir/err" ||
    { cat "$dir/err" >&2; exit 1; }
  read -r secs kib <"$dir/time"
  printf '%-40s %6.2f s  peak %6.1f MB\n' "$label" "$secs" "$(echo "$kib" | awk '{print $1 / 1024}')"
  eval "${label%% *}_s=$secs"
}

rm -f "$logs/big/timeline/rank-0.json"
measure "ssh_cat (OpenSSH: ssh node0 cat FILE)" "$cluster" exec "$dir" sh -c \
  "ssh -q -i '$dir/id_ed25519' -o UserKnownHostsFile='$dir/known_hosts' -o BatchMode=yes \
   root@10.231.0.10 cat '$logs/big/timeline/rank-0.json' >'$dir/copy.json'"
rm -f "$dir/copy.json"
measure "fetch_merge (dtrain timeline)" "$cluster" exec "$dir" "$dtrain" timeline \
  --log-dir "$logs" --job big
measure "merge (dtrain timeline --no-fetch)" "$dtrain" timeline --no-fetch --log-dir "$logs" \
  --job big
cmp -s "$logs/big/timeline/rank-0.json" "$dir/trace.json" && echo "fetched copy: identical"
awk -v a="$fetch_merge_s" -v m="$merge_s" -v s="$ssh_cat_s" -v b="$bytes" 'BEGIN {
  f = a - m; if (f <= 0) f = 0.01
  printf "fetch alone: %.2f s, %.1f MB/s; OpenSSH cat: %.1f MB/s; ratio %.2f\n",
         f, b / 1e6 / f, b / 1e6 / s, s / f }'
