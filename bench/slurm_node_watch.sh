#!/usr/bin/env bash
# What the Slurm node watch costs (`dtrain launch --node-timeout` on a `transport: slurm`
# cluster: every task's wrapper writes a status line on srun's stderr every half second, which
# dtrain reads). The same job, TASKS ranks on each of two nodes of a throwaway Slurm on this
# machine (tests/slurm/slurm-cluster.sh, root), each rank `sleep SECONDS`, with the watch
# (--node-timeout 10) and without (--node-timeout 0), alternated REPEATS times; the health
# checks are off in both, so only the watch differs. Prints the CPU seconds of dtrain and the
# srun it waits for (the launching side), their medians and the difference; then the node side: the CPU seconds of one task's heartbeat loop (the wrapper's
# own, run alone for SECONDS), as a share of one core.
# Usage: bench/slurm_node_watch.sh [BUILD_DIR] [SECONDS] [REPEATS]   (env TASKS, default 4)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/off_on_runs.sh"
build=$(cd "${1:-build}" && pwd)
seconds=${2:-20}
repeats=${3:-2}
tasks=${TASKS:-4}
work=$(mktemp -d)
export DTRAIN_SLURM_DIR=$work/slurm DTRAIN_SLURM_PORT=${DTRAIN_SLURM_PORT:-16857}
cluster_script=$here/../tests/slurm/slurm-cluster.sh
trap 'sh "$cluster_script" stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
eval "$(sh "$cluster_script" start)"
cat >"$work/cluster.yaml" <<EOF
transport: slurm
slurm: {time: "00:10:00"}
nodes:
  - {host: a, slots: $tasks}
  - {host: b, slots: $tasks}
log_dir: $work/logs
EOF

# One launch, MODE off (--node-timeout 0) or on (10); prints the CPU seconds (user + system) of
# dtrain and the children it waited for.
run() {
  local timeout=0
  [[ $1 == on ]] && timeout=10
  /usr/bin/time -f "%U %S" -o "$work/time" "$build/dtrain" launch -c "$work/cluster.yaml" \
    --job "$2" --quiet --node-timeout "$timeout" --health-watch 0 --start-health-check off \
    --restart-health-check off -- sleep "$seconds" >/dev/null 2>&1
  awk '{ printf "%.3f\n", $1 + $2 }' "$work/time"
}

echo "$tasks ranks on each of 2 Slurm nodes, each sleeping $seconds s; runs alternate" \
     "without/with the node watch, $repeats each"
alternate_off_on watch "s dtrain+srun CPU"
echo "median dtrain+srun CPU: without the watch $off s, with it $on s; the watch:" \
     "$(echo "scale=3; $on - $off" | bc) s over $seconds s and $((2 * tasks)) tasks" \
     "($((4 * tasks * seconds)) status lines)"

# The node side: the wrapper's heartbeat loop (launcher/slurm/slurm_step.cpp) for SECONDS.
/usr/bin/time -f "%U %S" -o "$work/beat" sh -c '
  ( trap "" INT TERM HUP; while printf "@m@A\n" >&3; do sleep 0.5 3>&-; done ) 3>&2 </dev/null >/dev/null 2>&1 &
  b=$!; sleep "$1"; kill -s STOP "$b"; pkill -KILL -P "$b"; kill -s KILL "$b"' beat "$seconds" \
  2>/dev/null
awk -v s="$seconds" '{ c = $1 + $2; printf "one task'"'"'s heartbeat loop: %.3f CPU s in %d s, %.3f %% of a core\n", c, s, 100 * c / s }' \
  "$work/beat"
