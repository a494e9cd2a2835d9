// dtrain against torchrun, the tool it replaces, run for real (torch from .venv): the same
// script under `torchrun --standalone --nproc-per-node 2` and `dtrain launch -np 2` prints its
// environment; every variable torchrun gives a rank, save those of torchrun's own agent, dtrain
// gives too, with the same value where the value is rank arithmetic. torchrun's own options,
// pasted after `dtrain launch`, do there what they do under torchrun.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/free_port.h"
#include "tests/support/shell_run.h"
#include "tests/support/test_paths.h"

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

// Variables only torchrun's agent has a use for: its health-check server, the NCCL debug files
// it names per worker; the watchdog timer's, which only TORCHELASTIC_ENABLE_FILE_TIMER=1 asks for
// (dtrain serves it then: launcher_file_timer_test.cpp). dtrain has no agent on the node.
const std::set<std::string> kAgentOnly = {
    "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE", "TORCHELASTIC_HEALTH_CHECK_PORT",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"};
// Values that name this run rather than a rank's place in it: checked for consistency below.
const std::set<std::string> kRunValues = {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                                          "TORCHELASTIC_ERROR_FILE"};

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

// --virtual-local-rank, under both launchers with CUDA_VISIBLE_DEVICES=3,5 where they run:
// every rank sees LOCAL_RANK 0 and its own one GPU.
TEST(TorchrunParity, VirtualLocalRankAlike) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-virtual");
  const std::string env = BareEnv() + "CUDA_VISIBLE_DEVICES=3,5 ";
  const testing::ShellRun torchrun =
      RunShell("cd " + dir.path() + " && " + env + kVenv +
               "/torchrun --standalone --nproc-per-node 2 --virtual-local-rank " + kScripts +
               "/env_dump.py");
  ASSERT_TRUE(torchrun.status.ok()) << torchrun.out;
  const testing::ShellRun dtrain = RunShell(
      "cd " + dir.path() + " && " + env + kDtrain + " launch -q -np 2 --log-dir " + dir.path() +
      "/logs --job virtual --virtual-local-rank -- python " + kScripts + "/env_dump.py");
  ASSERT_TRUE(dtrain.status.ok()) << dtrain.out;
  const std::map<int, RankEnv> want = ParseEnv(torchrun.out);
  ASSERT_EQ(want.size(), 2u) << torchrun.out;
  for (int r = 0; r < 2; ++r) {
    const RankEnv got =
        ParseEnv(ReadFile(dir.path() + "/logs/virtual/rank-" + std::to_string(r) + ".log"))[r];
    for (const char* name : {"LOCAL_RANK", "CUDA_VISIBLE_DEVICES"}) {
      ASSERT_TRUE(want.at(r).count(name)) << name << "\n" << torchrun.out;
      ASSERT_TRUE(got.count(name)) << name << " on rank " << r;
      EXPECT_EQ(got.at(name), want.at(r).at(name)) << name << " on rank " << r;
    }
  }
  EXPECT_EQ(want.at(1).at("CUDA_VISIBLE_DEVICES"), "'5'");
  EXPECT_EQ(want.at(1).at("LOCAL_RANK"), "'0'");
}

// Every option torchrun's --help lists is one `dtrain launch` knows: it does what it does there,
// is accepted with a note where it does not apply, or is refused with why (the two static
// rendezvous options of a per-node launcher, --node-rank and --master-addr, included). A torchrun
// that grows an option fails this test until dtrain knows it too.
TEST(TorchrunParity, EveryTorchrunOptionIsKnown) {
  REQUIRE_TORCHRUN();
  const testing::ShellRun help = RunShell(kVenv + "/torchrun --help");
  ASSERT_TRUE(help.status.ok()) << help.out;
  const testing::ShellRun ours = RunShell(kDtrain + " launch --help");
  std::set<std::string> options;
  static const std::regex option(R"((^|[ ,\[])(--[a-z][a-z0-9-]*)(?![a-z0-9_]))");
  std::istringstream lines(help.out);
  for (std::string line; std::getline(lines, line);) {
    // An option's own line ("  --nnodes NNODES   Number of ..."): the names before the text.
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || first == 0 || line[first] != '-') continue;
    const size_t text = line.find("  ", first);
    const std::string names = line.substr(0, text);
    for (auto it = std::sregex_iterator(names.begin(), names.end(), option);
         it != std::sregex_iterator(); ++it) {
      options.insert((*it)[2]);
    }
  }
  ASSERT_GE(options.size(), 25u) << help.out;  // 30 in torch 2.11
  TempDir dir("torchrun-options");
  for (const std::string& name : options) {
    if (name == "--help") continue;
    if (name == "--node-rank" || name == "--master-addr") {
      const testing::ShellRun run =
          RunShell(kDtrain + " launch -np 1 " + name + " 0 --log-dir " + dir.path() + " true");
      EXPECT_NE(run.out.find("dtrain takes the nodes from -c FILE"), std::string::npos) << run.out;
      continue;
    }
    const bool listed = ours.out.find(name + " ") != std::string::npos ||
                        ours.out.find(name + ",") != std::string::npos ||
                        ours.out.find(name + "\n") != std::string::npos;
    EXPECT_TRUE(listed) << "torchrun's " << name << " is not in dtrain launch --help";
  }
  // Accepted with a note, refused with why, before anything starts.
  const testing::ShellRun noted =
      RunShell(kDtrain + " launch -np 1 --log-dir " + dir.path() +
               " --local-addr 10.1.2.3 --event-log-handler null --start-method fork --run-path "
               "-- true");
  EXPECT_TRUE(noted.status.ok()) << noted.out;
  EXPECT_NE(noted.out.find("note: --local-addr 10.1.2.3 is not used"), std::string::npos);
  EXPECT_NE(noted.out.find("note: --event-log-handler null is not used"), std::string::npos);
  for (const std::string refused : {"--numa-binding cores", "--logs-specs custom"}) {
    const testing::ShellRun run = RunShell(kDtrain + " launch -np 1 --log-dir " + dir.path() +
                                           " --job refused " + refused + " -- true");
    EXPECT_EQ(run.status.code, 2) << refused << "\n" << run.out;
    EXPECT_NE(run.out.find(refused + ": "), std::string::npos) << run.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/refused")) << "a refused job started";
}

// The lines of `text`, sorted (torchrun's tail threads and dtrain's ranks interleave alike
// only by chance).
std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// --duplicate-stdout-filters and --duplicate-stderr-filters: the same lines, with the same
// "[default<rank>]:" headers, in torchrun's files of the attempt (it copies the ranks it tees,
// into its --log-dir) and in dtrain's of the job.
TEST(TorchrunParity, DuplicateFiltersCopyTheSameLines) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-filters");
  const std::string filters =
      " --duplicate-stdout-filters 'apple,orange,a,,b' --duplicate-stderr-filters apple ";
  const testing::ShellRun torchrun =
      RunShell("cd " + dir.path() + " && " + BareEnv() + kVenv +
               "/torchrun --standalone --nproc-per-node 2 " + "--log-dir " + dir.path() +
               "/torchrun --tee 3" + filters + kScripts + "/filtered_lines.py");
  ASSERT_TRUE(torchrun.status.ok()) << torchrun.out;
  const testing::ShellRun dtrain =
      RunShell("cd " + dir.path() + " && " + BareEnv() + kDtrain + " launch -q -np 2 --log-dir " +
               dir.path() + "/logs --job filters" + filters + "-- python " + kScripts +
               "/filtered_lines.py");
  ASSERT_TRUE(dtrain.status.ok()) << dtrain.out;
  for (const std::string name : {"filtered_stdout.log", "filtered_stderr.log"}) {
    const testing::ShellRun found =
        RunShell("find " + dir.path() + "/torchrun -name " + name + " | head -1");
    std::string path = found.out;
    while (!path.empty() && path.back() == '\n') path.pop_back();
    ASSERT_FALSE(path.empty()) << name << " not written by torchrun";
    const std::vector<std::string> want = SortedLines(ReadFile(path));
    const std::vector<std::string> got =
        SortedLines(ReadFile(dir.path() + "/logs/filters/" + name));
    EXPECT_EQ(got, want) << name;
    EXPECT_EQ(want.size(), name == "filtered_stdout.log" ? 6u : 2u) << ReadFile(path);
  }
}

// --numa-binding, every mode, on a machine of 32 CPUs (two threads a core, 4 NUMA nodes on 2
// sockets, L3 groups of unequal sizes, two CPUs the ranks may not use) and 6 GPUs (three on node
// 0, one of them saying numa_node -1, two on node 2, one on node 3), described by sysfs and
// nvidia-smi stand-ins (tests/torchrun/numa_cpus.py): the CPUs dtrain binds each rank to are
// those torch's own binding code (torch/numa/binding.py, run on the same sysfs) picks for its GPU.
// The binding itself is done by a taskset stand-in that says what it was asked (this machine has
// 2 CPUs); NumaBinding.* bind for real.
TEST(TorchrunParity, NumaBindingPicksTheCpusTorchPicks) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-numa");
  const testing::ShellRun torch =
      RunShell(kVenv + "/python " + kScripts + "/numa_cpus.py " + dir.path());
  ASSERT_TRUE(torch.status.ok()) << torch.out;
  std::map<std::string, std::map<int, std::string>> want;  // mode -> GPU -> CPUs
  std::istringstream lines(torch.out);
  for (std::string mode, cpus; lines >> mode;) {
    int gpu = -1;
    lines >> gpu >> cpus;
    want[mode][gpu] = cpus;
  }
  ASSERT_EQ(want.size(), 4u) << torch.out;
  for (const auto& [mode, by_gpu] : want) {
    ASSERT_EQ(by_gpu.size(), 6u) << torch.out;
    const testing::ShellRun dtrain =
        RunShell("cd " + dir.path() + " && " + BareEnv() + kDtrain + " launch -q -np 6 --log-dir " +
                 dir.path() + "/logs --job " + mode + " --numa-binding " + mode +
                 " -x DTRAIN_PROBE_SYSFS=" + dir.path() + "/sys -x PATH=" + dir.path() +
                 "/bin:/usr/bin:/bin -- true");
    ASSERT_TRUE(dtrain.status.ok()) << mode << "\n" << dtrain.out;
    for (const auto& [gpu, cpus] : by_gpu) {
      const std::string log =
          ReadFile(dir.path() + "/logs/" + mode + "/rank-" + std::to_string(gpu) + ".log");
      EXPECT_NE(log.find(": CPUs " + cpus + "\ntaskset -c " + cpus + "\n"), std::string::npos)
          << mode << " GPU " << gpu << ": torch binds to " << cpus << "\n"
          << log;
    }
  }
}

// Starts LAUNCH (a shell command) in the background, waits until both ranks said "ready" in
// OUT, sends SIGNAL to the launcher, and prints its exit status.
std::string SignalledRun(const std::string& dir, const std::string& launch, const std::string& out,
                         const std::string& signal) {
  return "cd " + dir + " && (" + launch + ") & pid=$!; i=0; " + "while [ \"$(cat " + out +
         " 2>/dev/null | grep -c ready)\" -lt 2 ] && [ $i -lt 600 ]; " +
         "do sleep 0.1; i=$((i + 1)); done; sleep 0.5; kill -" + signal + " $pid; wait $pid; " +
         "echo status=$?";
}

// --signals-to-handle with SIGUSR1 (what `sbatch --signal=USR1@90` sends before the time limit):
// the launcher stops the job, and every rank gets SIGUSR1 first, so it can checkpoint.
TEST(TorchrunParity, SignalsToHandleHandsTheSignalToEveryRank) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-signals");
  const std::string script = kScripts + "/closing_signal.py";
  const std::string list = " --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 ";
  const std::string torchrun_out = dir.path() + "/torchrun.txt";
  const testing::ShellRun torchrun =
      RunShell(SignalledRun(dir.path(),
                            BareEnv() + kVenv + "/torchrun --standalone --nproc-per-node 2" + list +
                                script + " >" + torchrun_out + " 2>&1",
                            torchrun_out, "USR1"));
  const std::string by_torchrun = ReadFile(torchrun_out);
  EXPECT_NE(by_torchrun.find("rank 0 got SIGUSR1"), std::string::npos) << by_torchrun;
  EXPECT_NE(by_torchrun.find("rank 1 got SIGUSR1"), std::string::npos) << by_torchrun;
  const testing::ShellRun dtrain = RunShell(SignalledRun(
      dir.path(),
      BareEnv() + kDtrain + " launch -np 2 --log-dir " + dir.path() + "/logs --job sig" + list +
          "-- python " + script + " >" + dir.path() + "/dtrain.txt 2>&1",
      dir.path() + "/logs/sig/rank-*.log", "USR1"));
  EXPECT_NE(dtrain.out.find("status=138"), std::string::npos)
      << ReadFile(dir.path() + "/dtrain.txt");
  for (int r = 0; r < 2; ++r) {
    const std::string log = ReadFile(dir.path() + "/logs/sig/rank-" + std::to_string(r) + ".log");
    EXPECT_NE(log.find("rank " + std::to_string(r) + " got SIGUSR1"), std::string::npos) << log;
  }
}

// streams.py's lines a console showed, as "stdout OUT 1 trainer": the launcher's prefix
// ("[trainer1]:" from torchrun, "[localhost:1] " from dtrain) dropped, the first `words` words
// of the line kept (the run id and the port are each launcher's own unless the test gives them).
std::multiset<std::string> Shown(const std::string& out, const std::string& err, size_t words) {
  std::multiset<std::string> shown;
  static const std::regex line(R"(^(\[[^\]]*\]:? ?)?((OUT|ERR) .*)$)");
  for (const auto& [stream, text] : {std::pair{"stdout", out}, std::pair{"stderr", err}}) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (!std::regex_match(l, m, line)) continue;
      std::istringstream fields(m[2].str());
      std::string kept = stream;
      std::string word;
      for (size_t i = 0; i < words && fields >> word; ++i) kept += " " + word;
      shown.insert(kept);
    }
  }
  return shown;
}

// torchrun's own options, pasted as they are after `dtrain launch`: --standalone, the
// rendezvous's endpoint and id, --role, -r/--redirects with -t/--tee (for every local rank and
// per local rank), --local-ranks-filter and --monitor-interval. Both launchers run the same
// script; their consoles show the same lines on the same streams, and the ranks see the same
// role and run id. dtrain's logs keep every line anyway.
TEST(TorchrunParity, TorchrunsOwnOptionsDoWhatTheyDoThere) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-options");
  const std::string port = std::to_string(test::FreePort());
  struct Case {
    std::string flags;
    size_t words;  // OUT, local rank, role, and the run id where both launchers are given it
  };
  const std::vector<Case> cases = {
      {"--standalone --nproc-per-node 2 -r 3 -t 1 --local-ranks-filter 1 --role trainer "
       "--monitor-interval 0.5",
       3},
      {"--nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint localhost:" + port +
           " --rdzv-id parity-7 --role trainer --redirects 0:3,1:2",
       4},
      {"--nproc_per_node 2 --rdzv_backend static --rdzv_endpoint 127.0.0.1:" + port +
           " --tee 1 --local_ranks_filter 0",
       3},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.flags);
    const std::string job = "options" + std::to_string(i);
    const std::string to = " >" + dir.path() + "/out 2>" + dir.path() + "/err";
    const testing::ShellRun torchrun =
        RunShell("cd " + dir.path() + " && " + BareEnv() + kVenv + "/torchrun " + c.flags + " " +
                 kScripts + "/streams.py" + to);
    ASSERT_TRUE(torchrun.status.ok()) << ReadFile(dir.path() + "/err");
    const auto want = Shown(ReadFile(dir.path() + "/out"), ReadFile(dir.path() + "/err"), c.words);
    const testing::ShellRun dtrain = RunShell(
        "cd " + dir.path() + " && " + BareEnv() + kDtrain + " launch --log-dir " + dir.path() +
        "/logs --job " + job + " " + c.flags + " " + kScripts + "/streams.py" + to);
    const std::string err = ReadFile(dir.path() + "/err");
    ASSERT_TRUE(dtrain.status.ok()) << err;
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(Shown(ReadFile(dir.path() + "/out"), err, c.words), want) << err;
    for (int r = 0; r < 2; ++r) {  // the logs keep what the console left out
      const std::string log =
          ReadFile(dir.path() + "/logs/" + job + "/rank-" + std::to_string(r) + ".log");
      EXPECT_NE(log.find("OUT " + std::to_string(r)), std::string::npos) << log;
      EXPECT_NE(log.find("ERR " + std::to_string(r)), std::string::npos) << log;
    }
    if (i == 0) {  // torchrun draws a run id of its own, so does dtrain: the job's name
      EXPECT_NE(err.find("--standalone (this machine)"), std::string::npos) << err;
    } else {  // the endpoint's port is the job's store, MASTER_PORT
      EXPECT_NE(err.find("rendezvous 127.0.0.1:" + port + " (--rdzv-endpoint)"), std::string::npos)
          << err;
      const std::string log = ReadFile(dir.path() + "/logs/" + job + "/rank-1.log");
      EXPECT_NE(log.find(" " + port + "\n"), std::string::npos) << log;
    }
  }
}

// torchrun's "Root Cause": rank 1 raises in a @record main and then prints 200 lines of noise;
// with --quiet (no rank output on the console) the report still leads with the exception, its
// rank, node, time and innermost file:line, and job.json records it. Each attempt has its own
// error file, so the restart's report is not the first attempt's file read again.
TEST(TorchrunParity, FailureReportLeadsWithTheRecordedException) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-record");
  const testing::ShellRun run =
      RunShell("cd " + dir.path() + " && " + BareEnv() + kDtrain +
               " launch -q -np 2 --max-restarts 1 --log-dir " + dir.path() +
               "/logs --job rec -- python " + kScripts + "/record_fails.py");
  EXPECT_EQ(run.status.ShellStatus(), 1) << run.out;
  const std::regex cause(
      "dtrain: rank 1 on node localhost failed: exit 1\n"
      "dtrain: root cause: rank 1 on node localhost at [0-9-]+ [0-9:]+ UTC: "
      "ValueError: expected 3 rows, got 4 on rank 1\n"
      "dtrain:   at " +
      kScripts + "/record_fails.py:18 \\(traceback in " + dir.path() +
      "/logs/rec/errors/attempt-1/rank-1.json\\)\n");
  EXPECT_TRUE(std::regex_search(run.out, cause)) << run.out;
  EXPECT_NE(run.out.find("errors/attempt-0/rank-1.json)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("shutdown noise 199"), std::string::npos) << "the tail follows";
  EXPECT_TRUE(fs::exists(dir.path() + "/logs/rec/errors/attempt-0/rank-1.json"));
  EXPECT_FALSE(fs::exists(dir.path() + "/logs/rec/errors/attempt-0/rank-0.json"));
  const std::string record = ReadFile(dir.path() + "/logs/rec/job.json");
  EXPECT_NE(record.find("\"root_cause\""), std::string::npos) << record;
  EXPECT_NE(record.find("rank 1 on node localhost: ValueError: expected 3 rows, got 4 on rank 1 ("),
            std::string::npos)
      << record;

  // A rank that writes no error file keeps the plain report.
  const testing::ShellRun plain = RunShell(
      "cd " + dir.path() + " && " + BareEnv() + kDtrain + " launch -q -np 1 --log-dir " +
      dir.path() + "/logs --job plain -- python -c 'import sys; print(\"bye\"); sys.exit(3)'");
  EXPECT_EQ(plain.status.ShellStatus(), 3) << plain.out;
  EXPECT_EQ(plain.out.find("root cause"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("[localhost:0] bye"), std::string::npos) << plain.out;
}

// The job's store is dtrain's and outlives every rank: rank 0 leaves at once, rank 1 writes to
// the store a second later and succeeds. -x TORCHELASTIC_USE_AGENT_STORE=False keeps rank 0 the
// host (no store started). Rank 0 calls destroy_process_group as it leaves: without it, torch's
// own race at interpreter exit aborts it now and then under any launcher (exit_abort_note.h),
// which bench/job_store_aborts.sh measures and which is not what this checks.
TEST(TorchrunParity, TheStoreOutlivesRankZero) {
  REQUIRE_TORCHRUN();
  TempDir dir("torchrun-store");
  const std::string script = kScripts + "/no_destroy.py";
  auto launch = [&](const std::string& job, const std::string& flags, const std::string& command) {
    return RunShell("cd " + dir.path() + " && " + BareEnv() +
                    "NO_DESTROY_LINGER=1 NO_DESTROY_LATE_SET=1 NO_DESTROY_RANK0_DESTROYS=1 " +
                    kDtrain + " launch -q -np 2 " + flags + " --log-dir " + dir.path() +
                    "/logs --job " + job + " -- " + command);
  };
  const testing::ShellRun ours = launch("ours", "", "python " + script);
  EXPECT_TRUE(ours.status.ok()) << ours.out;
  EXPECT_NE(ours.out.find("dtrain: the job's TCPStore on 127.0.0.1:"), std::string::npos)
      << ours.out;
  EXPECT_NE(ReadFile(dir.path() + "/logs/ours/rank-1.log").find("late set ok"), std::string::npos);
  const testing::ShellRun rank0 =
      launch("rank0", "-x TORCHELASTIC_USE_AGENT_STORE=False", "python " + script);
  EXPECT_EQ(rank0.out.find("the job's TCPStore"), std::string::npos) << rank0.out;
  // The same job behind a shell and an assignment, as users wrap it: the store is still
  // dtrain's (python3 found in the script), so rank 1's late write still succeeds.
  const testing::ShellRun wrapped =
      launch("wrapped", "", "sh -c 'cd / && OMP_NUM_THREADS=1 exec python3 " + script + "'");
  EXPECT_TRUE(wrapped.status.ok()) << wrapped.out;
  EXPECT_NE(wrapped.out.find("the job's TCPStore on 127.0.0.1:"), std::string::npos) << wrapped.out;
  EXPECT_NE(wrapped.out.find("(python3 on node"), std::string::npos) << wrapped.out;
  EXPECT_NE(ReadFile(dir.path() + "/logs/wrapped/rank-1.log").find("late set ok"),
            std::string::npos);
}

}  // namespace
}  // namespace dtrain
