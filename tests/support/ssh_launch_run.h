// `dtrain launch` run to its end against namespace nodes (tests/support/ssh_cluster.h): what it
// printed, its exit status and how long it took; and the cluster file with lines of a test's own.
#pragma once

#include <chrono>
#include <fstream>
#include <string>

#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain::test {

// The cluster file plus `extra` YAML lines, written beside it.
inline std::string ClusterFileWith(const SshTestCluster& cluster, const std::string& extra) {
  const std::string path = cluster.dir() + "/cluster-test.yaml";
  std::ofstream(path) << ReadText(cluster.cluster_file()) << extra;
  return path;
}

struct LaunchResult {
  std::string output;
  int status = -1;
  double seconds = 0;
};

// `command` (a shell line, its stderr with its stdout) run to its end.
inline LaunchResult RunLaunch(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  LaunchResult r;
  r.output = RunOutput(command + " 2>&1; echo \"status=$?\"");
  const size_t at = r.output.rfind("status=");
  if (at != std::string::npos) r.status = std::stoi(r.output.substr(at + 7));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// `dtrain launch <args>` (args as one shell line) run to its end. A launch that hangs fails the
// test within a minute (SIGINT: dtrain stops the job, 130).
inline LaunchResult Launch(const std::string& args) {
  return RunLaunch("timeout -s INT -k 10 60 " + std::string(DTRAIN_BINARY_DIR) + "/dtrain launch " +
                   args);
}

}  // namespace dtrain::test
