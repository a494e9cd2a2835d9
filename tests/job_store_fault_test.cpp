// The job's TCPStore (launcher/job_store.h) under a real fault: its Python is SIGKILLed, once
// while it still imports torch (the ranks already started beside it) and once while the ranks
// use it. Either way no rank is left waiting for a store that is gone: dtrain stops them at
// once and says why. Before the store listened, the same attempt starts again with rank 0
// hosting the store; after, the attempt failed, and a restart gets a fresh store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/free_port.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using testing::DtrainProcess;
using ::testing::HasSubstr;
using testing::ProcessesWithEnv;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

const std::string kSource = DTRAIN_SOURCE_DIR;
const std::string kPython = kSource + "/.venv/bin/python3";
const std::string kScript = kSource + "/tests/torchrun/store_rounds.py";

// The job's store serving `port`: the Python whose argv holds the store's script and the port.
int StorePid(int port) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string argv = ReadFile(entry.path().string() + "/cmdline");
    if (argv.find("dtrain-job-store-starting") == std::string::npos) continue;
    if (argv.find(std::string(1, '\0') + std::to_string(port) + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

nlohmann::json JobRecord(const std::string& dir, const std::string& job) {
  return nlohmann::json::parse(ReadFile(dir + "/logs/" + job + "/job.json"));
}

#define REQUIRE_TORCH() \
  if (!fs::exists(kPython)) FAIL() << kPython << " missing: run scripts/install-deps.sh"

TEST(JobStoreFault, StoreKilledBeforeItListensStartsTheRanksAgainWithRankZeroHosting) {
  REQUIRE_TORCH();
  TempDir dir("store-fault");
  const int port = test::FreePort();
  DtrainProcess job({"launch", "-np", "2", "--master-port", std::to_string(port), "--log-dir",
                     dir.path() + "/logs", "--job", "early", kPython, kScript},
                    dir.path());
  // The ranks start once the store's Python has found torch; it then imports torch (seconds)
  // before it listens: killed now, it never listened.
  int store = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        store = StorePid(port);
        return store > 0 && !ProcessesWithEnv("DTRAIN_JOB=early").empty();
      },
      60))
      << job.err();
  ASSERT_EQ(::kill(store, SIGKILL), 0);
  ASSERT_EQ(job.Wait(180), 0) << job.err();
  EXPECT_THAT(job.err(), HasSubstr("the job's TCPStore did not start with " + kPython +
                                   " on node localhost: it ended before listening"));
  EXPECT_THAT(job.err(), HasSubstr("every rank stopped and starts again; rank 0 hosts it"));
  EXPECT_THAT(ReadFile(dir.path() + "/logs/early/rank-1.log"), HasSubstr("met 2\ndone\n"));
  const nlohmann::json record = JobRecord(dir.path(), "early");
  EXPECT_EQ(record["attempts"].size(), 1u) << record.dump(1);  // not counted as a restart
  ASSERT_FALSE(record["events"].empty());
  EXPECT_EQ(record["events"][0]["kind"], "store");
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=early").empty());
}

TEST(JobStoreFault, StoreKilledWhileTheRanksUseItStopsThemAndARestartGetsAFreshOne) {
  REQUIRE_TORCH();
  TempDir dir("store-fault");
  const int port = test::FreePort();
  const std::string go = dir.path() + "/go";
  DtrainProcess job({"launch", "-np", "2", "--master-port", std::to_string(port), "--max-restarts",
                     "1", "-x", "STORE_ROUNDS_GO=" + go, "--log-dir", dir.path() + "/logs", "--job",
                     "late", kPython, kScript},
                    dir.path());
  const std::string log = dir.path() + "/logs/late/rank-1.log";
  ASSERT_TRUE(WaitFor([&] { return ReadFile(log).find("met 2") != std::string::npos; }, 120))
      << job.err();
  const int store = StorePid(port);
  ASSERT_GT(store, 0);
  ASSERT_EQ(::kill(store, SIGKILL), 0);
  // The ranks wait for `go` and use no store meanwhile: only dtrain can notice the store's end.
  ASSERT_TRUE(
      WaitFor([&] { return job.err().find("every rank stopped") != std::string::npos; }, 10))
      << job.err();
  testing::WriteFile(go, "");
  ASSERT_EQ(job.Wait(180), 0) << job.err();
  EXPECT_THAT(job.err(), HasSubstr("the job's TCPStore on node localhost failed: it ended while "
                                   "the ranks ran (killed by"));
  const nlohmann::json record = JobRecord(dir.path(), "late");
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(1);
  EXPECT_EQ(record["attempts"][0]["cause"], "store");
  EXPECT_EQ(record["attempts"][1]["exit_code"], 0);
  EXPECT_THAT(ReadFile(log), HasSubstr("done\n"));
  EXPECT_EQ(StorePid(port), -1);  // the second attempt's store ended with the job
}

}  // namespace
}  // namespace dtrain
