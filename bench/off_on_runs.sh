# Sourced (not run) by the benches that measure with a feature off and on, alternated so both see
# the same machine: heartbeat_cost.sh, timeline_overhead.sh (dtrain-clip's ms per step),
# slurm_node_watch.sh (CPU seconds), stop_agreement_cost.sh. They define `run MODE JOB` (MODE off
# or on; prints one number) and set $work and $repeats; the dtrain-clip ones call
# clip_bench_setup for those and $ranks, $steps and $batch.

# The dtrain-clip benches' set-up: the build (BUILD_DIR, default build) and its binaries (env
# DTRAIN and DTRAIN_CLIP pick others); $ranks, $steps, $batch and $repeats from the environment's
# RANKS, STEPS, BATCH and REPEATS (defaults 2, DEFAULT_STEPS, DEFAULT_BATCH, 3); $work, a
# temporary folder removed at exit.
# Usage: clip_bench_setup BUILD_DIR DEFAULT_STEPS DEFAULT_BATCH
clip_bench_setup() {
  build=$(cd "${1:-build}" && pwd)
  dtrain=${DTRAIN:-$build/dtrain}
  clip=${DTRAIN_CLIP:-$build/dtrain-clip}
  ranks=${RANKS:-2}
  steps=${STEPS:-$2}
  batch=${BATCH:-$3}
  repeats=${REPEATS:-3}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

# ms per step from a rank log's "done: N steps, ..., T s training" line, DECIMALS digits.
clip_ms_per_step() {
  sed -n 's/.*done: \([0-9]*\) steps, .* \([0-9.]*\) s training.*/\1 \2/p' "$1" |
    awk -v d="$2" '{ printf "%.*f\n", d, $2 * 1000 / $1 }'
}

# The median of the numbers on stdin (the mean of the middle two for an even count).
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The first line of a dtrain-clip bench's output.
clip_runs_header() {
  echo "dtrain-clip, $ranks ranks, $steps steps of batch $batch per rank, synthetic data;" \
       "runs alternate off/on, $repeats each"
}

# Runs off and on $repeats times each, alternating; prints each run as "run I, WHAT MODE: X
# UNIT" (UNIT: ms/step unless given) and sets $off and $on to the medians.
alternate_off_on() {
  local what=$1 unit=${2:-ms/step} i mode x
  : > "$work/off" && : > "$work/on"
  for i in $(seq 1 "$repeats"); do
    for mode in off on; do
      x=$(run "$mode" "$mode-$i")
      echo "  run $i, $what $mode: $x $unit"
      echo "$x" >> "$work/$mode"
    done
  done
  off=$(median < "$work/off")
  on=$(median < "$work/on")
}
