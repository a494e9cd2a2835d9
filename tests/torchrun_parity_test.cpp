// dtrain against torchrun, the tool it replaces, run for real (torch from .venv): the same
// script under `torchrun --standalone --nproc-per-node 2` and `dtrain launch -np 2` prints its
// environment; every variable torchrun gives a rank, save those of torchrun's own agent, dtrain
// gives too, with the same value where the value is rank arithmetic.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/files.h"
#include "tests/support/shell_run.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunShell;
using testing::TempDir;

const std::string kSource = DTRAIN_SOURCE_DIR;
const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";
const std::string kVenv = kSource + "/.venv/bin";
const std::string kScripts = kSource + "/tests/torchrun";

// Both launchers start from the same bare environment, so what a rank sees beyond it is what
// the launcher (or Python itself) added.
std::string BareEnv() {
  return "env -i PATH=" + kVenv + ":/usr/bin:/bin HOME=/root ";
}

#define REQUIRE_TORCHRUN()                                                                \
  if (!fs::exists(kVenv + "/torchrun")) {                                                 \
    FAIL() << kVenv << "/torchrun missing: run scripts/install-deps.sh (torch in .venv)"; \
  }

using RankEnv = std::map<std::string, std::string>;

// "ENV <rank> NAME='value'" lines -> rank -> NAME -> value (the repr as printed).
std::map<int, RankEnv> ParseEnv(const std::string& text) {
  std::map<int, RankEnv> out;
  static const std::regex line(R"(^ENV (\d+) ([A-Za-z_][A-Za-z0-9_]*)=(.*)$)");
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line)) out[std::stoi(m[1])][m[2]] = m[3];
  }
  return out;
}

// Variables only torchrun's agent has a use for: its watchdog timer file, its health-check
// server, the NCCL debug files it names per worker. dtrain has no such agent on the node.
const std::set<std::string> kAgentOnly = {
    "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE", "TORCHELASTIC_HEALTH_CHECK_PORT",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"};
// Values that name this run rather than a rank's place in it: checked for consistency below.
const std::set<std::string> kRunValues = {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                                          "TORCHELASTIC_ERROR_FILE",
                                          // True once dtrain hosts the job's store
                                          "TORCHELASTIC_USE_AGENT_STORE"};

TEST(TorchrunParity, EveryVariableTorchrunSetsDtrainSetsAlike) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-parity");
  const testing::ShellRun torchrun =
      RunShell("cd " + dir.path() + " && " + BareEnv() + kVenv +
               "/torchrun --standalone --nproc-per-node 2 " + kScripts + "/env_dump.py");
  ASSERT_TRUE(torchrun.status.ok()) << torchrun.out;
  const testing::ShellRun dtrain =
      RunShell("cd " + dir.path() + " && " + BareEnv() + kDtrain + " launch -q -np 2 --log-dir " +
               dir.path() + "/logs --job parity -- python " + kScripts + "/env_dump.py");
  ASSERT_TRUE(dtrain.status.ok()) << dtrain.out;
  std::map<int, RankEnv> want = ParseEnv(torchrun.out);
  std::map<int, RankEnv> got;
  for (int r = 0; r < 2; ++r) {
    got[r] = ParseEnv(ReadFile(dir.path() + "/logs/parity/rank-" + std::to_string(r) + ".log"))[r];
  }
  ASSERT_EQ(want.size(), 2u) << torchrun.out;
  const RankEnv bare = {{"PATH", ""}, {"HOME", ""}, {"LC_CTYPE", ""}};  // LC_CTYPE: Python's own
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(got[r].empty()) << "rank " << r << " printed no environment\n" << dtrain.out;
    for (const auto& [name, value] : want[r]) {
      if (bare.count(name) || kAgentOnly.count(name)) continue;
      auto it = got[r].find(name);
      ASSERT_NE(it, got[r].end()) << "torchrun sets " << name << "=" << value << " on rank " << r
                                  << "; dtrain does not";
      if (kRunValues.count(name)) continue;
      EXPECT_EQ(it->second, value) << name << " on rank " << r;
    }
  }
  const std::string rank0 = ReadFile(dir.path() + "/logs/parity/rank-0.log");
  EXPECT_NE(rank0.find("ELASTIC 0 True"), std::string::npos)
      << "torch.distributed.is_torchelastic_launched() under dtrain\n"
      << rank0;
  // The run's own values, consistent: one run id (the job), one rendezvous, a file per rank.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r]["TORCHELASTIC_RUN_ID"], "'parity'");
    EXPECT_EQ(got[r]["MASTER_PORT"], got[0]["MASTER_PORT"]);
    EXPECT_EQ(
        got[r]["TORCHELASTIC_ERROR_FILE"],
        "'" + dir.path() + "/logs/parity/errors/attempt-0/rank-" + std::to_string(r) + ".json'");
  }
}

}  // namespace
}  // namespace dtrain
