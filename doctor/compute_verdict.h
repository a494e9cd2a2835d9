// What `dtrain doctor --compute` concludes from each rank's run of `dtrain-clip check`: the
// training step's computations (attention, patch embedding, LayerNorm, a captured step) on the
// rank's device against references. A device whose results differ is an error naming its node:
// a GPU that computes wrong numbers without a fault to show for it (silent data corruption)
// spoils a run that nothing else stops. So is a check that never finished (a hung GPU) and one
// that could not run. Then how fast each device is (the check's SPEED lines: a matrix product, a
// copy within the device, on CUDA one from the host): a device below kSlowShare (kSlowShareCpu)
// of its peers' figure (the middle device's, the faster middle one of an even number) is an error
// too, since every synchronous step waits for the slowest GPU.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "doctor/checks.h"

namespace dtrain {

// The line the doctor's rank command prints after the check: "dtrain-check-exit <status>".
inline constexpr const char* kCheckExitMarker = "dtrain-check-exit ";

struct DeviceCheckLine {
  std::string name;  // "attention"
  bool passed = false;
  std::string detail;  // what was compared, the difference and its limit
};

// One "SPEED  <name> <value> <unit> (<detail>)" line of the check.
struct DeviceSpeedLine {
  std::string name;  // "matmul"
  double value = 0;
  std::string unit;  // "GFLOP/s"
  std::string detail;
};

// A device whose figure is below this share of its peers' is slow: a GPU, at 0.8 (a GPU a fifth
// slower than the others sets every synchronous step's pace); a CPU device at 0.5 and in the
// matrix product only, since CPU cores and the host's memory bandwidth are shared with whatever
// else the node runs (data loaders, the other ranks, the system) and vary more.
inline constexpr double kSlowShare = 0.8;
inline constexpr double kSlowShareCpu = 0.5;

struct RankComputeCheck {
  int rank = 0;
  std::string node;
  std::string device;    // from "dtrain-clip check on cuda:0" ("" if it never got that far)
  std::string model;     // a CUDA device's model: as the check named it, else its node's where
                         // the probe read one
  int exit_status = -1;  // the check's (124: it ran past the time limit); -1: never reported
  std::vector<DeviceCheckLine> checks;
  std::vector<DeviceSpeedLine> speeds;
  std::string last_words;  // what it said last, for a check that could not run
};

// One rank's log: the device line, each PASS/FAIL and SPEED line and the exit marker; other
// lines are skipped.
RankComputeCheck ParseComputeCheckLog(std::string_view log);

// Whether the rank's check ran to its end (status 0) and every check in it passed.
bool RankPassed(const RankComputeCheck& r);

// One finding per rank that failed, hung or could not run (errors, naming the node), then one ok
// finding when every rank passed. A check that every rank fails (two or more) is one error that
// names no node: a cause the devices share (LibTorch, CUDA, the driver, the check itself) is
// likelier than every GPU at once, and --exclude-bad must not empty the hostfile for it.
// Then, among the ranks that passed, per kind of device (cpu, cuda; CUDA devices per GPU model
// where known, so that a cluster mixing models does not call the older one slow): one error per
// slow device, naming its node, or one ok finding with each figure's range. `job_dir` is named
// where the logs help.
std::vector<Finding> JudgeComputeChecks(const std::vector<RankComputeCheck>& ranks,
                                        double timeout_s, const std::string& job_dir);

}  // namespace dtrain
