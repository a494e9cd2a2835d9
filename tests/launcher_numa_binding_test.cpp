// torchrun's --numa-binding (launcher/numa_binding.h, templates/numa_binding.sh) on real local
// ranks: an nvidia-smi stand-in first on the ranks' PATH gives two GPUs' PCI addresses, and a
// sysfs stand-in (DTRAIN_PROBE_SYSFS) puts GPU 0 on NUMA node 0 (CPU 0) and GPU 1 on node 1
// (CPU 1), both nodes on socket 0, or (MakeSharedNode) both GPUs on node 0 with CPUs 0 and 1.
// Each rank reads the CPUs the kernel lets it run on (Cpus_allowed_list): node binds rank R to
// CPU R, socket to both, exclusive and core-complex split node 0's two cores between its two GPUs
// (one L3 cache for both cores: core-complex gives each rank both); a GPU nvidia-smi does not
// know, or fewer cores than GPUs, ends the rank with why; a command not found is exit 127 as
// without the binding. (TorchrunParity.NumaBindingPicksTheCpusTorchPicks checks the choice
// against torch's own code on a machine of 32 CPUs.)
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;
using testing::WriteFile;

// The stand-ins under `dir`: bin/nvidia-smi (GPUs 0 and 1, or GPU 0 only) and sys/.
void MakeNode(const std::string& dir, int gpus) {
  namespace fs = std::filesystem;
  const std::string sys = dir + "/sys";
  const std::string buses[2] = {"0000:17:00.0", "0000:dc:00.0"};
  for (int i = 0; i < 2; ++i) {
    fs::create_directories(sys + "/bus/pci/devices/" + buses[i]);
    WriteFile(sys + "/bus/pci/devices/" + buses[i] + "/numa_node", std::to_string(i) + "\n");
    fs::create_directories(sys + "/devices/system/node/node" + std::to_string(i));
    WriteFile(sys + "/devices/system/node/node" + std::to_string(i) + "/cpulist",
              std::to_string(i) + "\n");
    fs::create_directories(sys + "/devices/system/cpu/cpu" + std::to_string(i) + "/topology");
    WriteFile(sys + "/devices/system/cpu/cpu" + std::to_string(i) + "/topology/physical_package_id",
              "0\n");
  }
  fs::create_directories(dir + "/bin");
  // nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i N, as the real one prints it.
  WriteFile(dir + "/bin/nvidia-smi",
            "#!/bin/sh\n"
            "gpu=\n"
            "while [ $# -gt 0 ]; do [ \"$1\" = -i ] && gpu=$2; shift; done\n"
            "case $gpu in\n"
            "'') echo 00000000:17:00.0; " +
                std::string(gpus > 1 ? "echo 00000000:DC:00.0 ;;\n" : ";;\n") +
                "0) echo 00000000:17:00.0 ;;\n" +
                std::string(gpus > 1 ? "1) echo 00000000:DC:00.0 ;;\n" : "") +
                "*) echo 'No devices were found'; exit 6 ;;\n"
                "esac\n");
  ::chmod((dir + "/bin/nvidia-smi").c_str(), 0755);
}

// MakeNode's stand-ins, then both GPUs on NUMA node 0 (GPU 1's numa_node -1, as a machine of one
// NUMA node says, which torch reads as node 0), whose CPUs are 0 and 1 (`cpus`), each CPU a core
// of its own, with an L3 cache each or (`one_l3`) one for both.
void MakeSharedNode(const std::string& dir, const std::string& cpus, bool one_l3) {
  MakeNode(dir, 2);
  const std::string sys = dir + "/sys";
  WriteFile(sys + "/bus/pci/devices/0000:dc:00.0/numa_node", "-1\n");
  WriteFile(sys + "/devices/system/node/node0/cpulist", cpus + "\n");
  for (int cpu = 0; cpu < 2; ++cpu) {
    const std::string base = sys + "/devices/system/cpu/cpu" + std::to_string(cpu);
    WriteFile(base + "/topology/thread_siblings_list", std::to_string(cpu) + "\n");
    const std::string l3 = base + "/cache/index3";
    std::filesystem::create_directories(l3);
    WriteFile(l3 + "/type", "Unified\n");
    WriteFile(l3 + "/level", "3\n");
    WriteFile(l3 + "/shared_cpu_list", one_l3 ? "0-1\n" : std::to_string(cpu) + "\n");
  }
}

// Two ranks that print the CPUs they may run on, under --numa-binding `mode`.
testing::DtrainRun Bound(const std::string& dir, const std::string& job, const std::string& mode,
                         std::vector<std::string> command = {
                             "sh", "-c", "grep Cpus_allowed_list /proc/self/status"}) {
  std::vector<std::string> args = {"launch",
                                   "-q",
                                   "-np",
                                   "2",
                                   "--log-dir",
                                   dir + "/logs",
                                   "--job",
                                   job,
                                   "--numa-binding",
                                   mode,
                                   "-x",
                                   "DTRAIN_PROBE_SYSFS=" + dir + "/sys",
                                   "-x",
                                   "PATH=" + dir + "/bin:/usr/bin:/bin",
                                   "--"};
  args.insert(args.end(), command.begin(), command.end());
  return RunDtrain(args, dir);
}

#define REQUIRE_TWO_CPUS()                                              \
  if (std::thread::hardware_concurrency() < 2) {                        \
    GTEST_SKIP() << "binding ranks to CPUs 0 and 1 needs a second CPU"; \
  }

TEST(NumaBinding, NodeBindsEachRankToItsGpusNumaNode) {
  REQUIRE_TWO_CPUS();
  TempDir dir;
  MakeNode(dir.path(), 2);
  const testing::DtrainRun run = Bound(dir.path(), "node", "node");
  ASSERT_EQ(run.status, 0) << run.err;
  for (int r = 0; r < 2; ++r) {
    const std::string log = ReadFile(dir.path() + "/logs/node/rank-" + std::to_string(r) + ".log");
    EXPECT_THAT(log, HasSubstr("Cpus_allowed_list:\t" + std::to_string(r) + "\n")) << log;
    EXPECT_THAT(log, HasSubstr("--numa-binding node: GPU " + std::to_string(r)));
  }
  EXPECT_THAT(ReadFile(dir.path() + "/logs/node/rank-1.log"),
              HasSubstr("GPU 1 (0000:dc:00.0) on NUMA node 1: CPUs 1"));
}

TEST(NumaBinding, SocketBindsEachRankToEveryNodeOfItsSocket) {
  REQUIRE_TWO_CPUS();
  TempDir dir;
  MakeNode(dir.path(), 2);
  const testing::DtrainRun run = Bound(dir.path(), "socket", "socket");
  ASSERT_EQ(run.status, 0) << run.err;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(ReadFile(dir.path() + "/logs/socket/rank-" + std::to_string(r) + ".log"),
                HasSubstr("Cpus_allowed_list:\t0-1\n"));
  }
}

// torch's exclusive: the node's cores split among the GPUs on it, each rank its own.
TEST(NumaBinding, ExclusiveGivesEachGpuOfTheNodeItsShareOfTheCores) {
  REQUIRE_TWO_CPUS();
  TempDir dir;
  MakeSharedNode(dir.path(), "0-1", true);
  const testing::DtrainRun run = Bound(dir.path(), "exclusive", "exclusive");
  ASSERT_EQ(run.status, 0) << run.err;
  for (int r = 0; r < 2; ++r) {
    const std::string log =
        ReadFile(dir.path() + "/logs/exclusive/rank-" + std::to_string(r) + ".log");
    EXPECT_THAT(log, HasSubstr("Cpus_allowed_list:\t" + std::to_string(r) + "\n")) << log;
    EXPECT_THAT(log, HasSubstr("on NUMA node 0: CPUs " + std::to_string(r) + "\n")) << log;
  }
}

// torch's core-complex: one L3 cache group per GPU of the node, a different one while there are
// enough; with one group for both, both ranks get it.
TEST(NumaBinding, CoreComplexGivesEachGpuAnL3CacheGroup) {
  REQUIRE_TWO_CPUS();
  for (const bool one_l3 : {false, true}) {
    TempDir dir;
    MakeSharedNode(dir.path(), "0-1", one_l3);
    const testing::DtrainRun run = Bound(dir.path(), "cc", "core-complex");
    ASSERT_EQ(run.status, 0) << run.err;
    for (int r = 0; r < 2; ++r) {
      const std::string log = ReadFile(dir.path() + "/logs/cc/rank-" + std::to_string(r) + ".log");
      EXPECT_THAT(log,
                  HasSubstr("Cpus_allowed_list:\t" + (one_l3 ? "0-1" : std::to_string(r)) + "\n"))
          << one_l3 << "\n"
          << log;
    }
  }
}

// Fewer cores than GPUs on the node: no share to give (torch raises), the rank ends with why.
TEST(NumaBinding, ExclusiveWithFewerCoresThanGpusEndsTheRankWithWhy) {
  TempDir dir;
  MakeSharedNode(dir.path(), "0", true);
  const testing::DtrainRun run = Bound(dir.path(), "few", "exclusive");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_THAT(
      ReadFile(dir.path() + "/logs/few/rank-0.log") + ReadFile(dir.path() + "/logs/few/rank-1.log"),
      HasSubstr("--numa-binding exclusive: NUMA node 0: it has 1 physical core(s) this "
                "rank may use for its 2 GPUs, fewer than one each (--numa-binding node "
                "shares them); leave --numa-binding out to run unbound"));
}

TEST(NumaBinding, AGpuTheNodeDoesNotHaveEndsTheRankWithWhy) {
  TempDir dir;
  MakeNode(dir.path(), 1);
  const testing::DtrainRun run = Bound(dir.path(), "one", "node");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_THAT(ReadFile(dir.path() + "/logs/one/rank-1.log"),
              HasSubstr("--numa-binding node: nvidia-smi -i 1: No devices were found; leave "
                        "--numa-binding out to run unbound"));
}

TEST(NumaBinding, ACommandNotFoundIsStillExit127) {
  TempDir dir;
  MakeNode(dir.path(), 2);
  const testing::DtrainRun run = Bound(dir.path(), "none", "node", {"no-such-program-here"});
  EXPECT_EQ(run.status, 127) << run.err;
  // Both ranks run it; the first to fail stops the other, which may not have said it yet.
  EXPECT_THAT(ReadFile(dir.path() + "/logs/none/rank-0.log") +
                  ReadFile(dir.path() + "/logs/none/rank-1.log"),
              HasSubstr("'no-such-program-here': command not found"));
}

}  // namespace
}  // namespace dtrain
