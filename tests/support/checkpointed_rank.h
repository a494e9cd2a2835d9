// The rank program of the node-loss and unfit-node tests on namespace nodes, and the step its job
// has reached.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/dtrain_process.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain::test {

// Each rank counts steps from the job's checkpoint file (rank 0 writes it after every step) to
// 40, a step every 0.25 s; rank 0 also writes a metrics line per step. `nodeloss-rank` marks the
// rank's processes on its node. Cut at step 4, the cut node's rank would run 9 s more on its
// own: longer than the node timeout, a sample of its dead-man switch and the grace period. Once
// the job's directory holds `stop` (EndRanksOnceStarted), each rank ends at its next step.
inline const char* kCheckpointedRankScript = R"sh(
ck=$DTRAIN_LOG_DIR/checkpoint
s=0; [ -f "$ck" ] && s=$(cat "$ck")
echo "rank $RANK of $WORLD_SIZE on $DTRAIN_NODE starts at step $s"
mkdir -p "$DTRAIN_LOG_DIR/metrics"
while [ "$s" -lt 40 ] && [ ! -f "$DTRAIN_LOG_DIR/stop" ]; do
  sleep 0.25; s=$((s + 1))
  if [ "$RANK" = 0 ]; then
    echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
    echo "{\"step\": $s}" >>"$DTRAIN_LOG_DIR/metrics/rank-0.jsonl"
  fi
done
echo "rank $RANK done")sh";

// The step in the job's checkpoint file, -1 before there is one.
inline int CheckpointStep(const std::string& job_dir) {
  const std::string text = ReadText(job_dir + "/checkpoint");
  return text.empty() ? -1 : std::atoi(text.c_str());
}

// Waits until rank 0 checkpointed step `step` (at most 30 s); false if it never did.
inline bool WaitForStep(const std::string& job_dir, int step) {
  return testing::WaitFor([&] { return CheckpointStep(job_dir) >= step; }, 30);
}

// Once `rank_log` (a rank's log file in job `job_dir`) holds `started` `times` (at most 30 s),
// writes the job's `stop`: its ranks end at their next step, "rank R done". For a test that saw
// what it waited for once the attempt that is to finish has started; false if it never did.
inline bool EndRanksOnceStarted(const std::string& job_dir, const std::string& rank_log,
                                const std::string& started, int times) {
  auto count = [&] {
    const std::string log = ReadText(job_dir + "/" + rank_log);
    int n = 0;
    for (size_t at = log.find(started); at != std::string::npos; at = log.find(started, at + 1))
      ++n;
    return n;
  };
  if (!testing::WaitFor([&] { return count() >= times; }, 30)) return false;
  std::ofstream(job_dir + "/stop") << "stop\n";
  return true;
}

}  // namespace dtrain::test
