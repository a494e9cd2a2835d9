// torchrun's "Root Cause" for a rank on another machine: a @record script fails on an ssh
// namespace node whose job folder is private (/srv/node is a tmpfs in each node's own mount
// namespace), so its error file exists only there. dtrain fetches it at the end of the attempt
// and the console report, with --quiet, still leads with the exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kSource = DTRAIN_SOURCE_DIR;
const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";
const std::string kPython = kSource + "/.venv/bin/python";
const std::string kScripts = kSource + "/tests/torchrun";

TEST(TorchrunErrorFetch, RootCauseOfARankOnAPrivateNode) {
  ASSERT_TRUE(fs::exists(kPython)) << kPython << " missing: run scripts/install-deps.sh";
  SshTestCluster cluster("err-fetch", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = "/srv/node/err-fetch-logs";  // private on every node
  fs::remove_all(logs);
  const std::string out = RunOutput(kDtrain + " launch -q -c " + cluster.cluster_file() +
                                    " --log-dir " + logs + " --job rec -- " + kPython + " " +
                                    kScripts + "/record_fails.py 2>&1; echo status=$?");
  EXPECT_NE(out.find("status=1"), std::string::npos) << out;
  // The file was written on node1 only; the launch brought it here.
  const std::string here = logs + "/rec/errors/attempt-0/rank-1.json";
  EXPECT_NE(cluster.OnNode(1, "test -s " + here + " && echo on-node1").find("on-node1"),
            std::string::npos);
  EXPECT_NE(cluster.OnNode(0, "test -e " + here + " || echo not-on-node0").find("not-on-node0"),
            std::string::npos);
  const std::regex cause(
      "dtrain: rank 1 on node node1 failed: exit 1\n"
      "dtrain: root cause: rank 1 on node node1 at [0-9-]+ [0-9:]+ UTC: "
      "ValueError: expected 3 rows, got 4 on rank 1\n"
      "dtrain:   at " +
      kScripts + "/record_fails.py:18 \\(traceback in " + here + "\\)\n");
  EXPECT_TRUE(std::regex_search(out, cause)) << out;
  EXPECT_NE(ReadText(here).find("expected 3 rows"), std::string::npos) << "fetched to " << here;
  fs::remove_all(logs);
}

// torchrun's worker watchdog on a node of its own: the FIFO, the watchdog and the error file it
// writes for the killed rank live on node1 only; the report still names the timer and the line
// the rank hung on, and node1 keeps neither a process nor a FIFO.
TEST(TorchrunErrorFetch, WatchdogTimerOfARankOnAPrivateNode) {
  ASSERT_TRUE(fs::exists(kPython)) << kPython << " missing: run scripts/install-deps.sh";
  SshTestCluster cluster("timer-fetch", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = "/srv/node/timer-fetch-logs";  // private on every node
  fs::remove_all(logs);
  const std::string out =
      RunOutput("TORCHELASTIC_ENABLE_FILE_TIMER=1 TORCHELASTIC_TIMER_FILE=/srv/node/wd " + kDtrain +
                " launch -q -c " + cluster.cluster_file() + " --log-dir " + logs + " --job wd -- " +
                kPython + " " + kScripts + "/timed_steps.py 2 1 0.2 2>&1; " + "echo status=$?");
  EXPECT_NE(out.find("status=137"), std::string::npos) << out;
  const std::string here = logs + "/wd/errors/attempt-0/rank-1.json";
  const std::regex cause(
      "dtrain: rank 1 on node node1 failed: killed by SIGKILL\n"
      "dtrain: root cause: rank 1 on node node1 at [0-9-]+ [0-9:]+ UTC: TimerExpired: the "
      "watchdog timer 'train_step' \\(torch.distributed.elastic.timer\\) of pid [0-9]+ expired "
      "2.0 s after it was set; killed with SIGKILL\n"
      "dtrain:   at " +
      kScripts + "/timed_steps.py:29 \\(traceback in " + here + "\\)\n");
  EXPECT_TRUE(std::regex_search(out, cause)) << out;
  EXPECT_NE(ReadText(logs + "/wd/rank-1.log").find("timer file /srv/node/wd.rank-1"),
            std::string::npos);
  EXPECT_EQ(cluster.OnNode(1, "ls /srv/node | grep -c '^wd' || true"), "0\n");
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");
  fs::remove_all(logs);
}

}  // namespace
}  // namespace dtrain
