// The node's shared memory (/dev/shm, templates/shm_segments.sh, doctor/shared_memory_checks.cpp):
// the rule on the probe's lines, then the probe and the rank end's removal for real, on a tmpfs of
// the test's own mounted over /dev/shm in a mount namespace of its own, with the segments of real
// Python processes (multiprocessing.shared_memory) killed outright and one still running.
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/fast_health_check.h"
#include "tests/support/files.h"
#include "tests/support/health_probes.h"
#include "tests/support/popen_shell.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/shm_segment.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using test::Describe;
using test::H100Probe;
using test::Health;
using test::Node;

// The shm-leftovers findings of `nodes`, as "severity message".
std::vector<std::string> LeftoverFindings(const std::vector<NodeFacts>& nodes) {
  std::vector<std::string> out;
  for (const Finding& f : Health(nodes))
    if (f.check == "shm-leftovers")
      out.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
  return out;
}

// A node of 600 MiB of shared memory with 40 MiB free: a segment no process holds (540 MiB) and a
// held one; node b's segment is held and what no process holds is a dataset copied there; node c
// has 64 GiB, 2 GiB of it segments no process holds; node d 100 MiB of them.
TEST(DoctorShmLeftovers, OnlySegmentsNoProcessHoldsMakeANodeUnfit) {
  const std::string a =
      "shm_kib=614400\nshm_free_kib=40960\nshm_unheld=563200;2;552960;1\n"
      "shm_file=552960;1000;bob;1796000000;7300;0;1;psm_5f2a91c0\n"
      "shm_file=20480;1000;bob;1796000000;30;1;1;torch_4242_1_0\n"
      "shm_file=10240;1000;bob;1796000000;30;0;0;notes.txt\n";
  const std::string b =
      "shm_kib=614400\nshm_free_kib=40960\nshm_unheld=563200;1;0;0\n"
      "shm_file=563200;1000;bob;1796000000;300;0;0;dataset.tar\n"
      "shm_file=10240;1000;bob;1796000000;30;1;1;psm_9e8d7c6b\n";
  const std::string c =
      "shm_kib=67108864\nshm_free_kib=64880640\nshm_unheld=2097152;3;2097152;3\n"
      "shm_file=1048576;0;root;1796000000;200000;0;1;nccl-Ab12Cd\n"
      "shm_file=524288;0;root;1796000000;200000;0;1;psm_01\n"
      "shm_file=524288;0;root;1796000000;200000;0;1;psm_02\n";
  const std::string d = "shm_kib=67108864\nshm_free_kib=66000000\nshm_unheld=102400;1;102400;1\n";
  const std::vector<NodeFacts> nodes = {Node("a", H100Probe(test::RecordedQuery(), "", a)),
                                        Node("b", H100Probe(test::RecordedQuery(), "", b)),
                                        Node("c", H100Probe(test::RecordedQuery(), "", c)),
                                        Node("d", H100Probe(test::RecordedQuery(), "", d))};
  ASSERT_EQ(nodes[0].health.shm.files.size(), 3u);
  EXPECT_EQ(nodes[0].health.shm.files[0].name, "psm_5f2a91c0");
  EXPECT_EQ(nodes[0].health.shm.files[0].held, 0);
  EXPECT_TRUE(nodes[0].health.shm.files[0].segment);
  EXPECT_EQ(nodes[0].health.shm.files[1].held, 1);
  EXPECT_FALSE(nodes[0].health.shm.files[2].segment);

  EXPECT_EQ(LeftoverFindings(nodes),
            (std::vector<std::string>{
                "error node a: /dev/shm is nearly full (40 MiB of 600 MiB free), and 540 MiB of "
                "it is 1 shared memory segment(s) no process holds: psm_5f2a91c0 (540 MiB, bob, "
                "2 h old)",
                "warning node b: 550 MiB of /dev/shm is in 1 file(s) no process holds "
                "(dataset.tar (550 MiB, bob, 5 min old)); 40 MiB of 600 MiB free",
                "warning node c: 2.0 GiB of /dev/shm is in 3 file(s) no process holds "
                "(nccl-Ab12Cd (1.0 GiB, root, 2 days old); psm_01 (512 MiB, root, 2 days old); "
                "psm_02 (512 MiB, root, 2 days old)); 61.9 GiB of 64.0 GiB free"}))
      << Describe(Health(nodes));
  const std::vector<Finding> a_findings = Health({nodes[0]});
  const Finding* error = test::Only(a_findings, "shm-leftovers");
  ASSERT_NE(error, nullptr);
  EXPECT_NE(error->remedy.find("rm /dev/shm/psm_5f2a91c0)"), std::string::npos) << error->remedy;

  // A launch's checks: node a is unfit; node b's dataset (a job's own files, maybe) is not held
  // against it, nor is a running job's held segment.
  ClusterSpec spec;
  for (const NodeFacts& n : nodes) {
    NodeSpec s;
    s.host = n.host;
    spec.nodes.push_back(s);
  }
  ProbeRun run;
  run.nodes = nodes;
  std::vector<std::string> unfit;
  for (const Finding& f : NodeFitnessFindings(spec, run, false)) {
    if (f.check == "shm-leftovers" && f.severity == Severity::kError) unfit.push_back(f.nodes[0]);
  }
  EXPECT_EQ(unfit, std::vector<std::string>{"a"});
}

// In a mount namespace of its own, over a 1 GiB tmpfs of the test's own on /dev/shm: a Python
// process that holds a 30 MiB segment (psm_dtrain_held) and runs on, and a 150 MiB dataset file
// no process holds; the probe as the launch's checks run it (no listing: there is room) and as the
// doctor does. Then a Python process that made a 300 MiB segment (psm_dtrain_left) and was killed
// with its process group (its resource tracker too, as SIGKILL after a grace period or a group's
// OOM kill does), and a 100 MiB PyTorch segment written two hours ago: the probe's lines as the
// launch's checks get them, the rule, and a rank end's removal since the test began.
const char* kScene = R"sh(set -e
mount --make-rprivate /
mount -t tmpfs -o size=1g dtrain-test-shm /dev/shm
since=$(date +%s)
. "$1/templates/shm_segments.sh"
# The probe's shared_memory, with DTRAIN_PROBE_SKIP set to $3.
probe() {
  DTRAIN_PROBE_SKIP=$3 sh -c '. "$1/templates/shm_segments.sh"; tmp=$2
    eval "$(sed -n -e "/^shared_memory() {/,/^}/p" -e "/^skipping() {/,/^}/p" \
      "$1/templates/probe.sh")"; shared_memory' probe "$1" "$2"
}
python3 "$2/segment.py" psm_dtrain_held 30 hold >"$2/held.out" 2>&1 &
held=$!
while ! grep -q made "$2/held.out"; do sleep 0.1; done
dd if=/dev/zero of=/dev/shm/dataset.bin bs=1M count=150 status=none
echo "== roomy, the launch's checks"
probe "$1" "$2" shm_files
echo "== roomy, the doctor"
probe "$1" "$2" ""
setsid --wait python3 "$2/segment.py" psm_dtrain_left 300 kill || true
dd if=/dev/zero of=/dev/shm/torch_1_2_3 bs=1M count=100 status=none
touch -d '2 hours ago' /dev/shm/torch_1_2_3
echo "== probe"
probe "$1" "$2" shm_files
echo "== remove"
dtrain_shm_remove "$since" node7
echo "== left"
ls /dev/shm
kill "$held"
)sh";

// The text of `out` between the line "== `from`" and the next "== " line.
std::string Section(const std::string& out, const std::string& from) {
  const size_t at = out.find("== " + from + "\n");
  if (at == std::string::npos) return "(no section " + from + ")";
  const size_t start = at + from.size() + 4;
  const size_t end = out.find("\n== ", start - 1);
  return out.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
}

TEST(DoctorShmLeftovers, TheProbeTellsLeftoversFromHeldSegmentsAndARankEndRemovesOnlyItsOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount namespace, a tmpfs on /dev/shm)";
  const std::string dir = testing::ScratchDirs::Make("shm-leftovers");
  testing::WriteFile(dir + "/scene.sh", kScene);
  testing::WriteFile(dir + "/segment.py", test::kShmSegmentScript);
  int status = 0;
  const std::string out = test::RunShell(
      "unshare -m sh " + dir + "/scene.sh " + std::string(DTRAIN_SOURCE_DIR) + " " + dir, &status);
  ASSERT_EQ(status, 0) << out;
  const std::string probe = Section(out, "probe");
  const std::string removed = Section(out, "remove");
  const std::string left = Section(out, "left");

  // With room (180 MiB of 1 GiB used), the launch's checks leave the listing out; the doctor
  // makes it.
  EXPECT_EQ(Section(out, "roomy, the launch's checks"), "shm_kib=1048576\nshm_free_kib=864256\n")
      << out;
  EXPECT_NE(Section(out, "roomy, the doctor").find("shm_unheld=153600;1;0;0\n"), std::string::npos)
      << out;

  // What no process holds: the killed process's segment, the old one and the dataset; of them
  // the two segments (300 + 100 MiB).
  EXPECT_NE(probe.find("shm_unheld=563200;3;409600;2\n"), std::string::npos) << probe;
  const NodeFacts n = Node("node7", H100Probe(test::RecordedQuery(), "", probe));
  EXPECT_EQ(n.shm_kib, 1024 * 1024);
  std::vector<std::string> files;
  for (const SharedMemoryFile& f : n.health.shm.files) {
    files.push_back(f.name + " " + std::to_string(f.kib) + " held=" + std::to_string(f.held) +
                    " segment=" + std::to_string(f.segment));
  }
  EXPECT_EQ(files,
            (std::vector<std::string>{
                "psm_dtrain_left 307200 held=0 segment=1", "dataset.bin 153600 held=0 segment=0",
                "torch_1_2_3 102400 held=0 segment=1", "psm_dtrain_held 30720 held=1 segment=1"}))
      << probe;
  const std::vector<std::string> found = LeftoverFindings({n});
  ASSERT_EQ(found.size(), 1u) << probe;
  EXPECT_EQ(found[0].rfind("error node node7: /dev/shm is nearly full (", 0), 0u) << found[0];
  EXPECT_NE(found[0].find("400 MiB of it is 2 shared memory segment(s) no process holds: "
                          "psm_dtrain_left (300 MiB, root, "),
            std::string::npos)
      << found[0];

  // A rank's end since the test began removes the killed process's segment alone: not the
  // running process's, not one written before, not a file of another name.
  EXPECT_EQ(removed,
            "dtrain: node7: removed 1 shared memory segment(s) that processes killed outright "
            "left in /dev/shm (300 MiB: psm_dtrain_left); no process held them\n")
      << out;
  EXPECT_EQ(left, "dataset.bin\npsm_dtrain_held\ntorch_1_2_3\n") << out;
}

}  // namespace
}  // namespace dtrain
