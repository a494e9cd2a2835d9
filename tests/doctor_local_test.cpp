// `dtrain doctor` end to end on this machine through the local transport: the real probe, the
// real rendezvous listener, the real binary and its exit statuses (0, 1, 2).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor/tool_versions.h"
#include "tests/support/files.h"
#include "tests/support/free_port.h"
#include "tests/support/loop_disk.h"
#include "tests/support/shell_run.h"
#include "tests/support/slow_disk.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

struct Result {
  int status = -1;
  std::string out;
};

// `status`: the exit code, -1 when a signal ended it.
Result Shell(const std::string& command) {
  const testing::ShellRun run = testing::RunShell(command);
  return {run.status.signal != 0 || !run.status.error.empty() ? -1 : run.status.code, run.out};
}

using testing::ReadFile;

using test::FreePort;

class DoctorLocal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("dtrain-doctor-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "project");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteCluster(const std::string& extra, int port, const std::string& workdir = "") {
    std::string path = (dir_ / "cluster.yaml").string();
    std::ofstream(path) << "transport: local\nnodes:\n  - {host: here, address: 127.0.0.1}\n"
                        << "rendezvous: {port: " << port << "}\n"
                        << "workdir: " << (workdir.empty() ? (dir_ / "project").string() : workdir)
                        << "\njob: {command: [python3, train.py]}\n"
                        << extra;
    return path;
  }

  // `dtrain doctor ARGS`; `within`: a shell prefix it runs after (SlowDisk::Within).
  Result Doctor(const std::string& args, const std::string& within = "") {
    return Shell(within + "env NO_COLOR= " + DTRAIN_BINARY_DIR + "/dtrain doctor " + args);
  }

  std::filesystem::path dir_;
};

TEST_F(DoctorLocal, HealthyNodeExitsZeroWithRealFacts) {
  Result r = Doctor("--json -c " + WriteCluster("", FreePort()));
  ASSERT_EQ(r.status, 0) << r.out;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["nodes"].size(), 1u);
  const auto& node = doc["nodes"][0];
  EXPECT_TRUE(node["reached"].get<bool>());
  const auto& facts = node["facts"];
  EXPECT_EQ(facts["rendezvous"], "ok") << r.out;
  EXPECT_EQ(facts["pythonpath_workdir"], "yes") << r.out;
  EXPECT_EQ(facts["workdir_exists"], true);
  EXPECT_GT(facts["cpus"].get<int>(), 0);
  EXPECT_EQ(facts["cpus"].get<int>(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_LT(std::abs(facts["clock_offset_s"].get<double>()), 1.0);
  std::string header = ReadFile("/usr/local/cuda/include/nccl.h");
  if (!header.empty()) {
    // The NCCL the probe reports is the one this machine's toolkit carries.
    EXPECT_EQ(facts["nccl_header"], NcclFromHeader(header)->text);
    EXPECT_EQ(facts["nccl"].get<std::string>().substr(0, 4),
              NcclFromHeader(header)->MajorMinor().substr(0, 4));
    EXPECT_FALSE(facts["cuda"].is_null());
  }
}

// The kernel's IPv4 neighbour table as /proc/net/stat shows it: hex, one line per CPU, the
// entries the same on each, table_fulls counted per CPU.
struct ArpCache {
  long long entries = -1, fulls = 0;
};

ArpCache ReadArpCache() {
  std::ifstream in("/proc/net/stat/arp_cache");
  std::string line;
  std::getline(in, line);  // the header
  ArpCache c;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> v;
    for (std::string f; fields >> f;) v.push_back(f);
    if (v.size() < 13) continue;
    if (c.entries < 0) c.entries = std::stoll(v[0], nullptr, 16);
    c.fulls += std::stoll(v[12], nullptr, 16);
  }
  return c;
}

TEST_F(DoctorLocal, NeighbourTableIsTheKernelsOwnCount) {
  const ArpCache before = ReadArpCache();
  if (before.entries < 0) {
    GTEST_SKIP() << "no /proc/net/stat/arp_cache here (only the first network namespace has it)";
  }
  Result r = Doctor("--json -c " + WriteCluster("", FreePort()));
  const ArpCache after = ReadArpCache();
  auto doc = nlohmann::json::parse(r.out);
  const auto& table = doc["nodes"][0]["facts"]["health"]["neighbour_tables"]["IPv4"];
  ASSERT_TRUE(table.is_object()) << r.out;
  EXPECT_GE(table["full_since_boot"].get<long long>(), before.fulls) << table;
  EXPECT_LE(table["full_since_boot"].get<long long>(), after.fulls) << table;
  EXPECT_GE(table["entries"].get<long long>(), 0) << table;
  for (const char* limit : {"gc_thresh1", "gc_thresh2", "gc_thresh3"}) {
    const std::string sysctl = ReadFile(std::string("/proc/sys/net/ipv4/neigh/default/") + limit);
    ASSERT_FALSE(sysctl.empty()) << limit;
    EXPECT_EQ(table[limit].get<long long>(), std::stoll(sysctl)) << limit;
  }
}

// py-spy (Python stacks in stall reports) is found where the rank probe looks: beside the job's
// python; a Python job on a node without it gets a warning naming the node.
TEST_F(DoctorLocal, PySpyBesideThePythonOrAWarningNamingTheNode) {
  const std::string venv_python = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/python3";
  if (access((std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/py-spy").c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no py-spy in .venv (scripts/install-deps.sh --tests installs it)";
  }
  Result with = Doctor("--json -c " + WriteCluster("python: " + venv_python + "\n", FreePort()));
  ASSERT_EQ(with.status, 0) << with.out;
  auto doc = nlohmann::json::parse(with.out);
  EXPECT_EQ(doc["nodes"][0]["facts"]["py_spy"].get<std::string>().rfind(
                std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/py-spy ", 0),
            0u)
      << with.out;
  EXPECT_EQ(with.out.find("\"py-spy\""), std::string::npos) << with.out;

  if (access("/usr/bin/py-spy", X_OK) == 0) return;  // the system python has one beside it
  Result without =
      Shell("env -i PATH=/usr/bin:/bin HOME=" + dir_.string() + " NO_COLOR=1 " + DTRAIN_BINARY_DIR +
            "/dtrain doctor -c " + WriteCluster("python: /usr/bin/python3\n", FreePort()));
  EXPECT_EQ(without.status, 0) << without.out;  // a warning, not an error
  EXPECT_NE(without.out.find("py-spy is not on node here"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("pip install py-spy"), std::string::npos) << without.out;
}

TEST_F(DoctorLocal, TextReportWithoutColourWhenPiped) {
  Result r = Doctor("-c " + WriteCluster("", FreePort()));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find('\033'), std::string::npos);
  EXPECT_NE(r.out.find("node"), std::string::npos);
  EXPECT_NE(r.out.find("0 errors"), std::string::npos) << r.out;
}

// On a terminal (script(1) gives the doctor one) the report is coloured, unless NO_COLOR is set
// to something.
TEST_F(DoctorLocal, ColourOnlyOnATerminalAndNotWithNoColor) {
  if (Shell("command -v script").status != 0) GTEST_SKIP() << "needs script(1) (util-linux)";
  const std::string file = WriteCluster("", FreePort());
  const std::string doctor = std::string(DTRAIN_BINARY_DIR) + "/dtrain doctor -c " + file;
  Result tty = Shell("NO_COLOR= script -qec '" + doctor + "' /dev/null");
  EXPECT_NE(tty.out.find("\033[1m"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("\033[32mok"), std::string::npos) << tty.out;
  Result plain = Shell("NO_COLOR=1 script -qec '" + doctor + "' /dev/null");
  EXPECT_NE(plain.out.find("0 errors"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find('\033'), std::string::npos) << plain.out;
}

TEST_F(DoctorLocal, MissingWorkdirAndWrongPinExitOne) {
  Result r = Doctor("-c " + WriteCluster("expect: {python: \"2.7\"}\n", FreePort(),
                                         (dir_ / "no-such-dir").string()));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expect.python is 2.7: here has"), std::string::npos) << r.out;
}

TEST_F(DoctorLocal, BusyRendezvousPortIsAnError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  Result r = Doctor("-c " + WriteCluster("", ntohs(addr.sin_port)));
  close(fd);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("in use"), std::string::npos) << r.out;
}

// A probe still running at --timeout is stopped with SIGKILL; the report says it did not answer
// in time, not that it was killed.
TEST_F(DoctorLocal, ProbeStoppedAtTimeoutIsATimeout) {
  const std::string slow = (dir_ / "slow-python").string();
  std::ofstream(slow) << "#!/bin/sh\nsleep 60\n";
  std::filesystem::permissions(slow, std::filesystem::perms::owner_all);
  Result r = Doctor("--json --timeout 2 -c " + WriteCluster("python: " + slow + "\n", FreePort()));
  EXPECT_EQ(r.status, 1) << r.out;
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  const auto& node = doc["nodes"][0];
  EXPECT_EQ(node["reached"], false) << node.dump();
  EXPECT_EQ(node["failure"], "timeout") << node.dump();
  EXPECT_EQ(node["error"], "no answer within 2 s (the probe was stopped)") << node.dump();
}

// The test write where the job writes (templates/probe.sh probe_writes), on disks of the test's
// own (root): a log dir on a healthy disk passes; once its drive is gone (LoopDisk::Fail), the
// doctor names the node, the folder and fsync's reason, an error. On a disk whose writes the kernel
// holds to 1 KiB/s (SlowDisk: the 64 KiB would take a minute), the write has not ended after
// DTRAIN_PROBE_WRITE_TIMEOUT (1 s): an error, the file system (ext4) being the node's own, and the
// doctor answers in seconds (the probe's guard gives a process stuck in the kernel 5 s to end),
// not the write's time.
TEST_F(DoctorLocal, ALogDirWhoseDriveFailsOrHangsIsNamed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a loop device, a mount, a block I/O cgroup)";
  {
    testing::LoopDisk disk(dir_.string());
    ASSERT_EQ(disk.error(), "");
    const std::string cluster = WriteCluster("log_dir: " + disk.path() + "/logs\n", FreePort());
    Result healthy = Doctor("--json -c " + cluster);
    const auto doc = nlohmann::json::parse(healthy.out, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << healthy.out;
    const auto& writes = doc["nodes"][0]["facts"]["health"]["write_tests"];
    ASSERT_EQ(writes.size(), 3u) << writes.dump(2);
    for (const auto& w : writes) EXPECT_EQ(w["result"], "ok") << writes.dump(2);
    EXPECT_EQ(writes[1]["what"], "log dir");
    EXPECT_EQ(writes[1]["folder"], disk.path());
    ASSERT_TRUE(disk.Fail()) << disk.error();
    Result failed = Doctor("-c " + cluster);
    EXPECT_EQ(failed.status, 1) << failed.out;
    EXPECT_NE(failed.out.find("node here: cannot write in " + disk.path() +
                              " (the nearest existing folder of log dir " + disk.path() +
                              "/logs): fsync: Input/output error\n"),
              std::string::npos)
        << failed.out;
  }
  testing::SlowDisk slow((dir_ / "slow").string(), "dtrain-doctor-slow-disk", 1024);
  if (!slow.error().empty()) GTEST_SKIP() << slow.error();
  const std::string cluster = WriteCluster(
      "log_dir: " + slow.path() + "\nenv: {DTRAIN_PROBE_WRITE_TIMEOUT: \"1\"}\n", FreePort());
  const auto start = std::chrono::steady_clock::now();
  Result hung = Doctor("-c " + cluster, slow.Within());
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(hung.out.find("node here: writing 64 KiB in log dir " + slow.path() +
                          " had not ended after 1 s (ext4, a drive of the node's own)\n"),
            std::string::npos)
      << hung.out;
  EXPECT_EQ(hung.status, 1) << hung.out;
  EXPECT_LT(took, 20) << hung.out;
}

TEST_F(DoctorLocal, ClusterFileErrorExitsTwo) {
  std::string path = WriteCluster("bogus_key: 1\n", FreePort());
  Result r = Doctor("-c " + path);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("bogus_key"), std::string::npos) << r.out;
  EXPECT_EQ(Doctor("--timeout -3 -c " + WriteCluster("", FreePort())).status, 2);
}

TEST_F(DoctorLocal, ProbeWorksWithAMinimalPath) {
  Result r = Shell("env -i PATH=/usr/bin:/bin HOME=/ DTRAIN_PROBE_SKIP=python sh -s < " +
                   std::string(DTRAIN_SOURCE_DIR) + "/templates/probe.sh");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\nprobe_end=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncpus="), std::string::npos);
  EXPECT_NE(r.out.find("\nnofile="), std::string::npos);
  if (std::filesystem::exists("/usr/local/cuda/bin/nvcc")) {
    EXPECT_NE(r.out.find("\nnvcc=Cuda compilation tools, release"), std::string::npos) << r.out;
  }
  if (std::filesystem::exists("/usr/local/cuda/include/nccl.h")) {
    EXPECT_NE(r.out.find("\nnccl_define=#define NCCL_MAJOR"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nnccl_lib="), std::string::npos) << r.out;
  }
}

// The cluster file's own health checks, run by the real probe: in the workdir, with the cluster's
// and the node's environment and DTRAIN_NODE, stdin closed, all at once, each under its limit.
// The report names the check, the node, the exit status and the last line it printed; one that
// does not end in time is said so, well within the probe's own limit (raised for it).
TEST_F(DoctorLocal, SiteHealthChecksFailTimeOutOrPass) {
  std::ofstream(dir_ / "project" / "marker") << "here\n";
  const std::string checks = R"(env: {SCRATCH: /nonexistent-scratch}
health_checks:
  - name: in-workdir
    run: test -f marker && test "$DTRAIN_NODE" = here
  - name: scratch
    run: 'printf "checking\n\n%s is not mounted; see ticket 12\n\n" "$SCRATCH"; exit 3'
    fix: ask the admins to mount it
  - name: hung-mount
    run: echo stat-ing; read line; sleep 60
    timeout: 2
  - name: firmware
    run: exit 1
    severity: warning
)";
  const auto start = std::chrono::steady_clock::now();
  Result r = Doctor("--json --timeout 1 -c " + WriteCluster(checks, FreePort()));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_LT(took, 20) << "the checks run at once, the hung one stopped at its 2 s";
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  const auto& node = doc["nodes"][0];
  ASSERT_EQ(node["reached"], true) << node.dump() << " (the probe's limit is the slowest check's)";
  const auto& answers = node["facts"]["health"]["health_checks"];
  EXPECT_EQ(answers["in-workdir"]["exit_status"], 0) << answers.dump();
  EXPECT_EQ(answers["scratch"]["exit_status"], 3) << answers.dump();
  EXPECT_EQ(answers["scratch"]["last_line"], "/nonexistent-scratch is not mounted; see ticket 12");
  EXPECT_EQ(answers["hung-mount"]["last_line"], "stat-ing") << answers.dump();
  EXPECT_GE(answers["hung-mount"]["ms"].get<long long>(), 2000) << answers.dump();
  std::map<std::string, std::pair<std::string, std::string>> found;  // message -> severity, fix
  for (const auto& f : doc["findings"]) {
    if (f["check"] == "health_check") {
      found[f["message"]] = {f["severity"].get<std::string>(),
                             f["remedy"].is_string() ? f["remedy"].get<std::string>() : ""};
    }
  }
  using P = std::pair<std::string, std::string>;
  bool passed = false;
  for (const auto& [message, what] : found) {
    passed =
        passed || (message.rfind("health check 'in-workdir' passed on all 1 node(s)", 0) == 0 &&
                   what.first == "ok");
  }
  EXPECT_TRUE(passed) << r.out;
  EXPECT_EQ(found["node here: health check 'scratch' failed (exit 3): /nonexistent-scratch is not "
                  "mounted; see ticket 12"],
            P("error", "ask the admins to mount it"))
      << r.out;
  EXPECT_EQ(found["node here: health check 'hung-mount' did not end in 2 s; its last line: "
                  "stat-ing"],
            P("error", "run it on here to see why: echo stat-ing; read line; sleep 60"))
      << r.out;
  EXPECT_EQ(found["node here: health check 'firmware' failed (exit 1)"].first, "warning") << r.out;
}

}  // namespace
}  // namespace dtrain
