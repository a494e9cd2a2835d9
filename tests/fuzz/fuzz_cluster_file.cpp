// The cluster file (YAML): any bytes give a ClusterSpec or a dtrain::Error, never a crash, an
// escaping yaml-cpp exception or memory out of proportion to the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/rank_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dtrain::ClusterSpec spec = dtrain::ParseClusterText(text, "fuzz.yaml");
    dtrain::PlanOptions options;
    options.job_name = "fuzz";
    options.job_dir = "/tmp/fuzz";
    options.launch_dir = "/tmp";
    dtrain::MakeRankPlan(spec, options);
  } catch (const dtrain::Error&) {
  }
  return 0;
}
