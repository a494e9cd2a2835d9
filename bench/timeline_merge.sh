#!/usr/bin/env bash
# Merge speed of `dtrain timeline`: generates RANKS rank traces of MB megabytes each in
# dtrain-clip's format (compute spans, a fusion buffer's allreduce with args, CYCLE_START marks),
# then times the merge alone and with --summary, and prints MB/s and peak memory beside the
# time `cat` takes to copy the same bytes (the disk's bound on this machine). CPU seconds are
# printed beside wall seconds: on a busy machine they are the steadier figure. With
# BASELINE=/path/to/another/dtrain, that binary is timed on the same inputs too, interleaved.
#
#   bench/timeline_merge.sh [BUILD_DIR] [MB] [RANKS]      defaults: build 200 2
set -euo pipefail
build=${1:-build}
mb=${2:-200}
ranks=${3:-2}
dtrain=$(cd "$build" && pwd)/dtrain
[ -x "$dtrain" ] || { echo "no $dtrain: build the dtrain target first" >&2; exit 2; }
dir=$(mktemp -d /tmp/dtrain-merge-bench-XXXXXX)
trap 'rm -rf "$dir"' EXIT

generate() {  # rank file
  awk -v rank="$1" -v bytes=$((mb * 1000000)) 'BEGIN {
    printf "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"rank %d\", \"start_time_since_epoch_in_micros\": 1763800000000000, \"rank\": %d, \"host\": \"node%d\"}}", rank, rank, rank
    printf ",\n{\"name\": \"clock_offset\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"clock_offset_us\": %d, \"clock_rtt_us\": 40}}", rank * 7
    printf ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"compute\"}}"
    printf ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"args\": {\"name\": \"fusion.0\"}}"
    written = 0; t = 0
    while (written < bytes) {
      s = sprintf(",\n{\"ph\": \"i\", \"name\": \"CYCLE_START\", \"ts\": %d, \"s\": \"g\"}", t)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"DATA\", \"ts\": %d, \"pid\": 1}", t + 1)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"DATA\", \"ts\": %d, \"pid\": 1}", t + 200)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"FORWARD\", \"ts\": %d, \"pid\": 1}", t + 201)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"FORWARD\", \"ts\": %d, \"pid\": 1}", t + 700)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"BACKWARD\", \"ts\": %d, \"pid\": 1}", t + 701)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": %d, \"pid\": 2, \"args\": {\"bytes\": 1048576, \"tensors\": 3, \"dtype\": \"float32\"}}", t + 750)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"QUEUE\", \"ts\": %d, \"pid\": 2}", t + 751)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"QUEUE\", \"ts\": %d, \"pid\": 2}", t + 950)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"GLOO_ALLREDUCE\", \"ts\": %d, \"pid\": 2}", t + 951)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"BACKWARD\", \"ts\": %d, \"pid\": 1}", t + 1200)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"GLOO_ALLREDUCE\", \"ts\": %d, \"pid\": 2}", t + 1500)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"ALLREDUCE\", \"ts\": %d, \"pid\": 2}", t + 1501)
      s = s sprintf(",\n{\"ph\": \"B\", \"name\": \"OPTIMIZER\", \"ts\": %d, \"pid\": 1}", t + 1502)
      s = s sprintf(",\n{\"ph\": \"E\", \"name\": \"OPTIMIZER\", \"ts\": %d, \"pid\": 1}", t + 1600)
      printf "%s", s
      written += length(s); t += 1700
    }
    printf "\n]\n"
  }' >"$2"
}

inputs=()
for r in $(seq 0 $((ranks - 1))); do
  generate "$r" "$dir/rank-$r.json"
  inputs+=("$dir/rank-$r.json")
done
total=$(cat "${inputs[@]}" | wc -c)
echo "inputs: $ranks rank traces, $((total / 1000000)) MB in all, on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

measure() {  # label command...
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time" "$@" >/dev/null 2>"$dir/err" ||
    { cat "$dir/err" >&2; exit 1; }
  read -r secs user sys kib <"$dir/time"
  awk -v l="$label" -v s="$secs" -v u="$user" -v y="$sys" -v k="$kib" -v b="$total" \
    'BEGIN { c = u + y; printf "%-34s %6.2f s wall %7.1f MB/s | %6.2f s cpu %7.1f MB/s | peak %6.1f MB\n",
             l, s, b / 1e6 / s, c, b / 1e6 / (c > 0 ? c : 0.01), k / 1024 }'
}

sync
measure "cat (copy, the bound)" sh -c "cat ${inputs[*]} >$dir/copy.json"
rm -f "$dir/copy.json"
for round in 1 2; do
  measure "dtrain timeline" "$dtrain" timeline -o "$dir/merged.json" "${inputs[@]}"
  [ -z "${BASELINE:-}" ] ||
    measure "baseline timeline" "$BASELINE" timeline -o "$dir/merged.json" "${inputs[@]}"
  measure "dtrain timeline --summary" "$dtrain" timeline --summary -o "$dir/merged.json" \
    "${inputs[@]}"
  [ -z "${BASELINE:-}" ] || measure "baseline timeline --summary" "$BASELINE" timeline \
    --summary -o "$dir/merged.json" "${inputs[@]}"
done
