// The doctor's rules about where a job writes, on probe outputs (tests/support/health_probes.h):
// free space, the probe's test writes that fail, and those that hang (against the other nodes'
// writes, and by the file system's type), as the doctor judges them and as a launch holds them.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/checks.h"
#include "doctor/fast_health_check.h"
#include "tests/support/health_probes.h"

namespace dtrain {
namespace {

using test::Describe;
using test::H100Probe;
using test::Health;
using test::Node;
using test::Only;
using test::RecordedQuery;

TEST(DoctorHealth, LittleFreeSpaceWhereTheJobWrites) {
  const std::string low =
      "free_space=log dir;5242880;/data;/data/logs\n"
      "free_space=/tmp;524288;/tmp;/tmp\n";
  const auto findings = Health({Node("gpu-a", H100Probe(RecordedQuery(), "", low))});
  std::vector<std::string> messages;
  for (const Finding& f : findings) {
    if (f.check == "disk")
      messages.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
  }
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "warning node gpu-a: 5.0 GiB free on /data (log dir /data/logs)",
                          "error node gpu-a: 512 MiB free on /tmp (/tmp)"}))
      << Describe(findings);
}

// The probe's test writes (templates/probe.sh probe_writes): a drive that failed is an error
// wherever the job writes, a read-only log dir or /tmp too; a read-only workdir may be one on
// purpose, and a folder the user cannot write is not the node's fault (warnings); a write that
// hangs is a warning naming the drive.
TEST(DoctorHealth, WritesThatFailWhereTheJobWrites) {
  const std::string failing =
      "free_space=log dir;5242880000;/scratch;/scratch/logs/job\n"
      "write_test=workdir;ok;/home/u/proj;/home/u/proj\n"
      "write_test=log dir;fsync: Input/output error;/scratch/logs;/scratch/logs/job\n"
      "write_test=/tmp;create: Permission denied;/tmp;/tmp\n";
  const std::string read_only =
      "free_space=workdir;5242880000;/code;/code/proj\n"
      "write_test=workdir;create: Read-only file system;/code/proj;/code/proj\n"
      "write_test=/tmp;timeout 10;/tmp;/tmp\n";
  const auto findings = Health({Node("gpu-a", H100Probe(RecordedQuery(), "", failing)),
                                Node("gpu-b", H100Probe(RecordedQuery(), "", read_only)),
                                Node("gpu-c", H100Probe())});
  std::vector<std::string> messages, remedies;
  for (const Finding& f : findings) {
    if (f.check != "disk-write") continue;
    messages.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
    remedies.push_back(f.remedy);
  }
  EXPECT_EQ(messages,
            (std::vector<std::string>{
                "error node gpu-a: cannot write in /scratch/logs (the nearest existing folder of "
                "log dir /scratch/logs/job): fsync: Input/output error",
                "warning node gpu-a: cannot write in /tmp: create: Permission denied",
                "warning node gpu-b: cannot write in workdir /code/proj: create: Read-only file "
                "system",
                "warning node gpu-b: writing 64 KiB in /tmp had not ended after 10 s"}))
      << Describe(findings);
  const std::vector<std::string> starts = {
      "the drive under /scratch failed a write", "make it writable for this user",
      "if it is read-only on purpose (code on a read-only share), point log_dir",
      "the drive under / hangs or is swamped"};
  ASSERT_EQ(remedies.size(), starts.size());
  for (size_t i = 0; i < starts.size(); ++i)
    EXPECT_EQ(remedies[i].rfind(starts[i], 0), 0u) << remedies[i];
}

// A write that hung on one node while the others wrote in the same place in time: that node's
// drive (or mount) hangs, an error. One that hung on every node (shared storage swamped) names
// no node's fault: one warning naming them all. To a launch both are warnings, the first held
// against its node, the second against none.
TEST(DoctorHealth, AWriteThatHangsOnOneNodeOnlyIsAnError) {
  auto writes = [](const std::string& log_dir, const std::string& tmp) {
    return "free_space=log dir;5242880000;/scratch;/scratch/logs/job\n"
           "write_test=log dir;" +
           log_dir +
           ";/scratch/logs;/scratch/logs/job\n"
           "write_test=/tmp;" +
           tmp + ";/tmp;/tmp\n";
  };
  const std::vector<NodeFacts> nodes = {
      Node("gpu-a", H100Probe(RecordedQuery(), "", writes("ok", "timeout 10"))),
      Node("gpu-b", H100Probe(RecordedQuery(), "", writes("timeout 10", "timeout 10"))),
      Node("gpu-c", H100Probe(RecordedQuery(), "", writes("ok", "timeout 10")))};
  const auto findings = Health(nodes);
  std::vector<std::string> messages;
  const Finding* hung = nullptr;
  for (const Finding& f : findings) {
    if (f.check != "disk-write") continue;
    messages.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
    if (f.severity == Severity::kError) hung = &f;
  }
  const std::string everywhere =
      "nodes gpu-a, gpu-b, gpu-c: writing 64 KiB in /tmp had not ended after 10 s on any of them";
  const std::string one =
      "node gpu-b: writing 64 KiB in /scratch/logs (the nearest existing folder of log dir "
      "/scratch/logs/job) had not ended after 10 s, while nodes gpu-a, gpu-c wrote there in time";
  EXPECT_EQ(messages, (std::vector<std::string>{"warning " + everywhere, "error " + one}))
      << Describe(findings);
  ASSERT_TRUE(hung);
  EXPECT_EQ(hung->nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_EQ(hung->remedy.rfind("the drive under /scratch (or node gpu-b's mount of it) hangs", 0),
            0u)
      << hung->remedy;
  EXPECT_EQ(WriteHangWarnings(nodes),
            (std::multimap<std::string, std::string>{{"", everywhere}, {"gpu-b", one}}));
}

// The file system's type tells a drive of the node's own from storage the nodes share: a write
// that hung on a node probed alone is then that node's fault (an error, held against it by a
// launch); on storage that may be shared it stays a warning naming no fault. Nodes whose own
// drives all hung get one warning (a burst of writes on each, more likely than as many drives
// failing at once).
TEST(DoctorHealth, AWriteThatHangsOnTheNodesOwnDriveIsAnErrorAlone) {
  auto node = [](const std::string& host, const std::string& type, const std::string& result) {
    return Node(host, H100Probe(RecordedQuery(), "",
                                "free_space=log dir;5242880000;/scratch;/scratch/logs/job\n"
                                "fs_type=log dir;" +
                                    type +
                                    "\n"
                                    "write_test=log dir;" +
                                    result + ";/scratch/logs;/scratch/logs/job\n"));
  };
  auto disk_writes = [](const std::vector<Finding>& findings) {
    std::vector<std::string> messages;
    for (const Finding& f : findings) {
      if (f.check == "disk-write")
        messages.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
    }
    return messages;
  };
  const std::string place =
      "writing 64 KiB in /scratch/logs (the nearest existing folder of log dir /scratch/logs/job) "
      "had not ended after 10 s";
  const std::vector<NodeFacts> alone = {node("gpu-a", "ext4", "timeout 10")};
  for (const FreeSpace& f : alone[0].health.free_space)
    EXPECT_EQ(f.type, f.what == "log dir" ? "ext4" : "") << f.what;
  const auto own = Health(alone);
  const std::string own_message = "node gpu-a: " + place + " (ext4, a drive of the node's own)";
  EXPECT_EQ(disk_writes(own), std::vector<std::string>{"error " + own_message}) << Describe(own);
  const Finding* error = Only(own, "disk-write");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->nodes, std::vector<std::string>{"gpu-a"});
  EXPECT_EQ(error->remedy.rfind("the drive under /scratch hangs or is swamped", 0), 0u)
      << error->remedy;
  EXPECT_EQ(WriteHangWarnings(alone),
            (std::multimap<std::string, std::string>{{"gpu-a", own_message}}));

  const std::vector<NodeFacts> shared = {node("gpu-a", "nfs4", "timeout 10")};
  EXPECT_EQ(disk_writes(Health(shared)), std::vector<std::string>{"warning node gpu-a: " + place});
  EXPECT_EQ(WriteHangWarnings(shared),
            (std::multimap<std::string, std::string>{{"", "node gpu-a: " + place}}));

  const auto everywhere =
      Health({node("gpu-a", "xfs", "timeout 10"), node("gpu-b", "xfs", "timeout 10")});
  EXPECT_EQ(disk_writes(everywhere),
            std::vector<std::string>{"warning nodes gpu-a, gpu-b: " + place + " on any of them"})
      << Describe(everywhere);
  const Finding* both = Only(everywhere, "disk-write");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->remedy.rfind("each node's own drive there hangs or is swamped (xfs; a burst of "
                               "writes on every node?)",
                               0),
            0u)
      << both->remedy;
}

}  // namespace
}  // namespace dtrain
