// The doctor's history rule (doctor/quarantine_history_checks.cpp) on job records written as
// dtrain writes them: an SSH node by its name, a Slurm node by the machine it was placed on.
#include <gtest/gtest.h>

#include <filesystem>

#include "doctor/checks.h"
#include "launcher/job_record.h"
#include "launcher/rank_log.h"
#include "tests/support/files.h"

namespace dtrain {
namespace {

constexpr int64_t kMinute = int64_t{60} * 1000000;

NodeSpec Node(const std::string& host, const std::string& machine = "") {
  NodeSpec node;
  node.host = host;
  node.machine = machine;
  return node;
}

// Job `name` in `log_dir`, ended `ago_us` before `now_us`, that quarantined `node`.
void WriteJob(const std::string& log_dir, const std::string& name, const std::string& transport,
              const NodeSpec& node, int64_t now_us, int64_t ago_us) {
  std::filesystem::create_directories(log_dir + "/" + name);
  JobRecord record;
  record.name = name;
  record.status = "succeeded";
  record.transport = transport;
  record.started_us = now_us - ago_us - kMinute;
  record.ended_us = now_us - ago_us;
  record.nodes = {node};
  record.quarantined[node.host] = "node " + node.host + " lost: no answer for 3 s";
  WriteJobRecord(log_dir + "/" + name, record);
}

TEST(DoctorHistory, SshNodeByNameSlurmNodeByTheMachineItRanOn) {
  testing::TempDir dir;
  const int64_t now = WallMicros();
  WriteJob(dir.path(), "cut", "ssh", Node("node1"), now, 12 * kMinute);
  WriteJob(dir.path(), "lost", "slurm", Node("b", "c042"), now, 3 * kMinute);

  ClusterSpec ssh;
  ssh.transport = TransportKind::kSsh;
  ssh.nodes = {Node("node0"), Node("node1"), Node("b")};
  std::vector<Finding> found = CheckRecentQuarantines(ssh, dir.path(), now);
  ASSERT_EQ(found.size(), 1u);  // b was a Slurm job's name for c042: not this SSH node b
  EXPECT_EQ(found[0].check, "history");
  EXPECT_EQ(found[0].severity, Severity::kWarning);
  EXPECT_EQ(found[0].nodes, std::vector<std::string>{"node1"});
  EXPECT_EQ(found[0].message,
            "node node1: job cut quarantined it 12 min ago: node node1 lost: no answer for 3 s; "
            "dtrain launch holds it back as a spare while another can take its place, for a day "
            "after (--hold-back, job.hold_back)");
  EXPECT_NE(found[0].remedy.find("dtrain status --job cut"), std::string::npos);

  // Placed on Slurm: node a runs on c042 this time, where node b was lost.
  ClusterSpec slurm;
  slurm.transport = TransportKind::kSlurm;
  slurm.nodes = {Node("a", "c042"), Node("b", "c043")};
  found = CheckRecentQuarantines(slurm, dir.path(), now);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].nodes, std::vector<std::string>{"a"});
  EXPECT_EQ(found[0].message,
            "node a (Slurm node c042): job lost quarantined it 3 min ago: node b lost: no answer "
            "for 3 s; dtrain launch leaves that Slurm node out of its batch jobs while Slurm can "
            "run them without it, for a day after (--hold-back, job.hold_back)");

  // The cluster file's job.hold_back is the window: 10 min leaves out the quarantine of 12 min
  // ago and keeps that of 3 min ago; 0 keeps none, as the launch then holds none back.
  ssh.job.hold_back_s = 600;
  EXPECT_TRUE(CheckRecentQuarantines(ssh, dir.path(), now).empty());
  slurm.job.hold_back_s = 600;
  found = CheckRecentQuarantines(slurm, dir.path(), now);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("for 10 min after (--hold-back, job.hold_back)"),
            std::string::npos)
      << found[0].message;
  slurm.job.hold_back_s = 0;
  EXPECT_TRUE(CheckRecentQuarantines(slurm, dir.path(), now).empty());
  slurm.job.hold_back_s = kDefaultHoldBackS;

  // A day later, or without a log dir, or on this machine alone: nothing.
  EXPECT_TRUE(CheckRecentQuarantines(slurm, dir.path(), now + 1441 * kMinute).empty());
  EXPECT_TRUE(CheckRecentQuarantines(slurm, "", now).empty());
  slurm.transport = TransportKind::kLocal;
  EXPECT_TRUE(CheckRecentQuarantines(slurm, dir.path(), now).empty());
}

// A node that two jobs quarantined within 8 windows is named for two windows after the newest,
// and the warning says so.
TEST(DoctorHistory, ANodeQuarantinedAgainIsNamedForLonger) {
  testing::TempDir dir;
  const int64_t now = WallMicros();
  WriteJob(dir.path(), "first", "ssh", Node("node1"), now, 50 * kMinute);
  WriteJob(dir.path(), "again", "ssh", Node("node1"), now, 15 * kMinute);
  ClusterSpec ssh;
  ssh.transport = TransportKind::kSsh;
  ssh.nodes = {Node("node0"), Node("node1")};
  ssh.job.hold_back_s = 600;  // 10 min: 20 for node1
  std::vector<Finding> found = CheckRecentQuarantines(ssh, dir.path(), now);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].message,
            "node node1: job again quarantined it 15 min ago, the 2nd job to do so within 80 min "
            "(held back 20 min, not 10 min): node node1 lost: no answer for 3 s; dtrain launch "
            "holds it back as a spare while another can take its place, for 20 min after "
            "(--hold-back, job.hold_back)");
  // 6 minutes on, past its 20: nothing.
  EXPECT_TRUE(CheckRecentQuarantines(ssh, dir.path(), now + 6 * kMinute).empty());
}

}  // namespace
}  // namespace dtrain
