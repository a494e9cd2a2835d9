// torchrun's "Root Cause" for a rank on another machine: a @record script fails on an ssh
// namespace node whose job folder is private (/srv/node is a tmpfs in each node's own mount
// namespace), so its error file exists only there. dtrain fetches it at the end of the attempt
// and the console report, with --quiet, still leads with the exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/ssh_cluster.h"

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

}  // namespace
}  // namespace dtrain
