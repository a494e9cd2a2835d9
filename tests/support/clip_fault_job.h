// The dtrain-clip job the node-fault tests launch on namespace nodes without shared storage:
// `dtrain launch` with job name "clip" in `logs`, one spare, one restart, a grace period of 2 s,
// quiet; dtrain-clip trains 300 steps of fmnist-tiny on synthetic data (16 samples a rank a step,
// about 0.1 s a step on two ranks here, so the job still runs when the fault comes), writes a
// step checkpoint every 2 steps (on every node: each keeps a copy) and a metrics line every
// step, and resumes from the latest checkpoint.
#pragma once

#include <string>
#include <vector>

namespace dtrain::testing {

// The arguments of `dtrain launch`; `launch_flags` go before the command.
inline std::vector<std::string> ClipFaultJob(const std::string& cluster_file,
                                             const std::string& logs,
                                             const std::vector<std::string>& launch_flags = {}) {
  std::vector<std::string> args = {
      "launch",   "-c", cluster_file,     "--job", "clip",           "--log-dir", logs,
      "--spares", "1",  "--grace-period", "2",     "--max-restarts", "1",         "--quiet"};
  args.insert(args.end(), launch_flags.begin(), launch_flags.end());
  const std::vector<std::string> clip = {"--",          "dtrain-clip",
                                         "train",       "--model",
                                         "fmnist-tiny", "--dataset-type",
                                         "synthetic",   "--batch-size",
                                         "16",          "--train-num-samples",
                                         "9600",        "--epochs",
                                         "1",           "--zeroshot-frequency",
                                         "0",           "--save-frequency",
                                         "0",           "--save-every-n-steps",
                                         "2",           "--log-every-n-steps",
                                         "1",           "--threads",
                                         "1",           "--seed",
                                         "0",           "--resume",
                                         "latest"};
  args.insert(args.end(), clip.begin(), clip.end());
  return args;
}

}  // namespace dtrain::testing
