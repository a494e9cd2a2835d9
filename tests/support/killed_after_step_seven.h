// A rank program for the steps-lost tests: every rank counts 10 steps of 0.1 s from the job's
// checkpoint file; rank 0 appends a metrics line with the step and the time (seconds since the
// epoch) to $DTRAIN_LOG_DIR/metrics/rank-0.jsonl, checkpoints every 3 steps, and SIGKILLs itself
// right after step 7 of the first attempt. The next attempt resumes from step 6: 1 step lost.
#pragma once

namespace dtrain::testing {

inline const char* const kKilledAfterStepSeven = R"sh(
ck=$DTRAIN_LOG_DIR/ck; s=0; [ -f "$ck" ] && s=$(cat "$ck")
mkdir -p "$DTRAIN_LOG_DIR/metrics"
while [ "$s" -lt 10 ]; do
  sleep 0.1; s=$((s + 1))
  [ "$RANK" = 0 ] || continue
  echo "{\"step\": $s, \"time\": $(date +%s.%N)}" >>"$DTRAIN_LOG_DIR/metrics/rank-0.jsonl"
  [ $((s % 3)) = 0 ] && echo "$s" >"$ck"
  [ "$s" = 7 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && kill -9 $$
done
exit 0)sh";

}  // namespace dtrain::testing
