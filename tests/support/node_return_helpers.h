// What the tests of nodes returning to a job share (launcher_node_return_test.cpp,
// launcher_node_wait_test.cpp): waiting for dtrain to say something, the --sync project and
// private-workdir cluster file, and a checkpointed rank long enough for a loss and a return.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain::test {

using Clock = std::chrono::steady_clock;
using testing::Since;
using testing::WaitForText;

// Brings node1's link back up while dtrain waits for nodes, and waits (at most 40 s) until it
// takes node1 back; prints and returns the seconds that took (-1: never).
inline double RestoreNode1UntilTakenBack(const SshTestCluster& cluster,
                                         const testing::DtrainProcess& dtrain) {
  cluster.OnNode(1, "ip link set eth0 up");
  const double back_s =
      WaitForText(dtrain, "dtrain: node node1 passed the health checks 2 rounds in a row after ",
                  Clock::now(), 40);
  std::printf("node1 restored: taken back after %.2f s\n", back_s);
  return back_s;
}

// The project a --sync test launches from: DIR/src holding synced.txt ("yes"), which each rank
// reads in its workdir. Returns DIR/src.
inline std::string SyncedProject(const std::string& dir) {
  const std::string src = dir + "/src";
  std::filesystem::create_directories(src);
  testing::WriteFile(src + "/synced.txt", "yes\n");
  return src;
}

// `cluster_text` with every node's workdir in its private storage (/srv/node/work, which only
// --sync fills), written beside the cluster's file; returns its path.
inline std::string PrivateWorkdirs(const SshTestCluster& cluster, const std::string& cluster_text) {
  const std::string file = cluster.dir() + "/workdir.yaml";
  testing::WriteFile(file, cluster_text + "workdir: /srv/node/work\n");
  return file;
}

// The checkpointed rank (tests/support/checkpointed_rank.h) counting to 100 steps instead of 40:
// 25 s, long enough for a loss, a restart and a return.
inline std::string LongerCheckpointedRank() {
  std::string script = test::kCheckpointedRankScript;
  const std::string forty = "-lt 40";
  script.replace(script.find(forty), forty.size(), "-lt 100");
  return script;
}

// `dtrain launch` of a job a test cuts a node of: `cluster_file`'s nodes, job `job` in `log_dir`,
// a node timeout of 3 s, a grace period of 2 s, one restart, the health watch every second,
// quiet, then the `extra` options; each rank runs `script` under sh, marked nodeloss-rank.
inline std::vector<std::string> CutNodeLaunch(const std::string& cluster_file,
                                              const std::string& job, const std::string& log_dir,
                                              const std::vector<std::string>& extra,
                                              const std::string& script) {
  std::vector<std::string> args = {"launch",     "-c",
                                   cluster_file, "--job",
                                   job,          "--log-dir",
                                   log_dir,      "--node-timeout",
                                   "3",          "--grace-period",
                                   "2",          "--max-restarts",
                                   "1",          "--health-watch",
                                   "1",          "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const std::string& word : {std::string("--"), std::string("sh"), std::string("-c"), script,
                                  std::string("nodeloss-rank")})
    args.push_back(word);
  return args;
}

}  // namespace dtrain::test
