// Real horovod.torch programs (Horovod 0.28.1 built by scripts/install-deps.sh --tests into
// .venv-horovod) started by `dtrain launch --horovod`, no horovodrun: 2 local ranks, 2 ranks on
// two namespace nodes over ssh (root; skipped otherwise), a rank that dies, and OpenCLIP's own
// training with --horovod. A missing .venv-horovod is a failure, not a skip.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kBin = DTRAIN_BINARY_DIR;
const std::string kSource = DTRAIN_SOURCE_DIR;
const std::string kVenvBin = kSource + "/.venv-horovod/bin";
const std::string kPython = kVenvBin + "/python3";
// Where horovodrun and dtrain are run side by side: a bare environment, .venv-horovod first on
// PATH, so that neither sees the test's own variables.
const std::string kBareEnv = "env -i PATH=" + kVenvBin + ":/usr/bin:/bin HOME=/root ";
const std::string kProgram = kSource + "/tests/horovod/hvd_allreduce_train.py";

#define REQUIRE_HOROVOD()                                                                         \
  if (!fs::exists(kPython) ||                                                                     \
      RunOutput(kPython + " -c 'import horovod.torch' 2>&1; echo rc=$?").find("rc=0") ==          \
          std::string::npos) {                                                                    \
    FAIL() << kPython << " cannot import horovod.torch: run scripts/install-deps.sh --tests (or " \
           << "scripts/install-horovod.sh) to build Horovod into .venv-horovod";                  \
  }

std::string Launch(const std::string& flags, const std::string& command) {
  return RunOutput(kBin + "/dtrain launch -q " + flags + " -- " + command +
                   " 2>&1; echo \"status=$?\"");
}

std::string RankLog(const std::string& job_dir, int rank) {
  return ReadText(job_dir + "/rank-" + std::to_string(rank) + ".log");
}

// Checks what hvd_allreduce_train.py printed on `rank` against dtrain's plan.
void ExpectHorovodRank(const std::string& log, int rank, int size, int local_rank, int local_size,
                       int cross_rank, int cross_size, const std::string& iface) {
  const std::string plan = fmt::format(
      "hvd-plan rank={} size={} local_rank={} local_size={} cross_rank={} cross_size={} iface={}\n",
      rank, size, local_rank, local_size, cross_rank, cross_size, iface);
  EXPECT_NE(log.find(plan), std::string::npos) << "want " << plan << "rank " << rank << ":\n"
                                               << log;
  EXPECT_NE(log.find("hvd-allreduce exact=1"), std::string::npos) << log;
  EXPECT_NE(log.find("hvd-train equal_reference=1"), std::string::npos) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("loss_first=([0-9.]+) loss_last=([0-9.]+)")));
  EXPECT_LT(std::stod(m[2]), std::stod(m[1])) << "the model trained";
}

TEST(HorovodLaunch, TwoLocalRanksAllreduceAndTrainAlike) {
  REQUIRE_HOROVOD();
  const std::string dir = kBin + "/horovod_launch/local";
  fs::remove_all(dir);
  const std::string out =
      Launch("--horovod --timeline -H localhost:2 --log-dir " + dir + " --job hvd",
             kPython + " " + kProgram);
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  EXPECT_NE(out.find("Horovod Gloo rendezvous on 127.0.0.1:"), std::string::npos) << out;
  for (int r = 0; r < 2; ++r) ExpectHorovodRank(RankLog(dir + "/hvd", r), r, 2, r, 2, 0, 1, "lo");
  // Horovod's own rank-0 timeline lands in the job folder and `dtrain timeline` merges it.
  const std::string horovod_trace = ReadText(dir + "/hvd/timeline/rank-0.json");
  EXPECT_NE(horovod_trace.find("GLOO_ALLREDUCE"), std::string::npos)
      << horovod_trace.substr(0, 500);
  const std::string merged =
      RunOutput(kBin + "/dtrain timeline --log-dir " + dir + " --job hvd -o " + dir +
                "/merged.json 2>&1; echo status=$?");
  EXPECT_NE(merged.find("status=0"), std::string::npos) << merged;
  const std::string merged_trace = ReadText(dir + "/merged.json");
  EXPECT_NE(merged_trace.find("GLOO_ALLREDUCE"), std::string::npos) << merged;
  EXPECT_NE(merged_trace.find("rank 0 (localhost)"), std::string::npos) << merged;
}

// No --horovod, no `--horovod` argument: the program is launched like any other and Horovod
// still initialises (horovodrun's users type `dtrain launch -np 2 python train.py`).
TEST(HorovodLaunch, TwoLocalRanksWithoutTheFlag) {
  REQUIRE_HOROVOD();
  const std::string dir = kBin + "/horovod_launch/noflag";
  fs::remove_all(dir);
  const std::string out = Launch("-np 2 --log-dir " + dir + " --job hvd", kPython + " " + kProgram);
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  EXPECT_EQ(out.find("Horovod Gloo rendezvous on"), std::string::npos) << "said only when asked";
  for (int r = 0; r < 2; ++r) ExpectHorovodRank(RankLog(dir + "/hvd", r), r, 2, r, 2, 0, 1, "lo");
}

// Two namespace nodes, a rank each, launched with `flags`: every rank on its own node,
// Horovod's ranks and sizes as horovodrun gives them, Gloo on eth0.
void ExpectTwoSshNodesAllreduce(const std::string& name, const std::string& flags) {
  SshTestCluster cluster(name, 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir() + "/hvd";
  const std::string out =
      Launch(flags + "-c " + cluster.cluster_file() + " --log-dir " + dir + " --job hvd",
             "sh -c 'echo host=$(hostname); exec " + kPython + " " + kProgram + "'");
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  for (int r = 0; r < 2; ++r) {
    const std::string log = RankLog(dir + "/hvd", r);
    EXPECT_NE(log.find("host=node" + std::to_string(r)), std::string::npos) << log;
    ExpectHorovodRank(log, r, 2, 0, 1, r, 2, "eth0");
  }
}

TEST(HorovodLaunch, TwoSshNodesAllreduceAndTrainAlike) {
  REQUIRE_HOROVOD();
  ExpectTwoSshNodesAllreduce("s21-hvd-2x1", "--horovod ");
}

// The same over ssh, with neither --horovod nor a `--horovod` argument: nothing asks the nodes
// before the launch, so each rank's remote command finds its interface as it starts (the
// nodes' hostnames resolve nowhere, so Gloo cannot fall back on them).
TEST(HorovodLaunch, TwoSshNodesWithoutTheFlag) {
  REQUIRE_HOROVOD();
  ExpectTwoSshNodesAllreduce("s21-hvdnf-2x1", "");
}

// "ENV <rank> NAME=VALUE" lines (hvd_env_dump.py), whatever prefix a launcher put before them.
std::set<std::string> DumpedEnv(const std::string& text, const std::string& rank) {
  std::set<std::string> env;
  static const std::regex line(R"(ENV (\S+) ([A-Z0-9_]+=.*)$)");
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line) && m[1] == rank) env.insert(m[2]);
  }
  return env;
}

// horovodrun's options that tune Horovod, pasted after `dtrain launch`: horovodrun itself and
// dtrain run the same script with the same options, and every HOROVOD_* and NCCL_* variable
// horovodrun gives a rank dtrain gives alike (save the rendezvous port, each launcher's own).
// The same with a horovodrun --config-file. Then Horovod itself reads them: --timeline-filename
// and --timeline-mark-cycles make it write its timeline, with cycle marks, to that file.
TEST(HorovodLaunch, HorovodrunsOwnOptionsSetWhatHorovodrunSets) {
  REQUIRE_HOROVOD();
  const std::string dir = kBin + "/horovod_launch/options";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string options =
      "--fusion-threshold-mb 32 --cycle-time-ms 2.5 --cache-capacity 512 "
      "--hierarchical-allreduce --no-hierarchical-allgather --autotune --autotune-log-file " +
      dir + "/autotune.csv --autotune-warmup-samples 2 --timeline-filename " + dir +
      "/hvd.json --timeline-mark-cycles --no-stall-check --stall-check-warning-time-seconds 30 "
      "--num-nccl-streams 2 --tcp --thread-affinity 1 --gloo-timeout-seconds 40 --log-level "
      "DEBUG --log-without-timestamp --network-interfaces lo --start-timeout 20 --gloo "
      "--verbose --disable-cache";
  const std::string dump = kSource + "/tests/horovod/hvd_env_dump.py";
  // Both launchers with `flags`: every variable horovodrun gives a rank, dtrain gives alike.
  auto expect_alike = [&](const std::string& job, const std::string& flags) {
    SCOPED_TRACE(flags);
    const std::string horovodrun =
        RunOutput(kBareEnv + kVenvBin + "/horovodrun -np 2 -H localhost:2 " + flags + " python " +
                  dump + " 2>&1; echo status=$?");
    ASSERT_NE(horovodrun.find("status=0"), std::string::npos) << horovodrun;
    const std::string dtrain =
        RunOutput(kBareEnv + kBin + "/dtrain launch -np 2 -H localhost:2 --log-dir " + dir +
                  " --job " + job + " " + flags + " python " + dump + " 2>&1; echo status=$?");
    ASSERT_NE(dtrain.find("status=0"), std::string::npos) << dtrain;
    for (const std::string rank : {"0", "1"}) {
      std::set<std::string> want = DumpedEnv(horovodrun, rank);
      std::set<std::string> got = DumpedEnv(dtrain, rank);
      ASSERT_GT(want.size(), 15u) << horovodrun;
      for (const std::string& item : want) {
        if (item.rfind("HOROVOD_GLOO_RENDEZVOUS_PORT=", 0) == 0) continue;
        EXPECT_EQ(got.count(item), 1u)
            << "horovodrun sets " << item << " on rank " << rank << "; dtrain does not\n"
            << dtrain;
      }
    }
  };
  expect_alike("env", options);
  // horovodrun's --config-file: the file's values under the command line's (--cycle-time-ms 7
  // over the file's 3.5, --no-autotune over `enabled: true`), a stall_check section without
  // `enabled` turning Horovod's check on.
  std::ofstream(dir + "/horovod.yaml") << "params:\n  fusion_threshold_mb: 16\n"
                                          "  cycle_time_ms: 3.5\n  hierarchical_allreduce: true\n"
                                          "autotune:\n  enabled: true\n  warmup_samples: 4\n"
                                          "timeline:\n  filename: "
                                       << dir
                                       << "/cfg.json\n  mark_cycles: false\n"
                                          "stall_check:\n  warning_time_seconds: 45\n"
                                          "library_options:\n  num_nccl_streams: 3\n"
                                          "logging:\n  level: INFO\n  with_timestamp: true\n"
                                          "controller: gloo\n";
  expect_alike("config",
               "--config-file " + dir +
                   "/horovod.yaml --cycle-time-ms 7 --no-autotune --network-interfaces lo");
  // Horovod reads them: its timeline, with cycle marks, in the named file.
  const std::string out =
      Launch("-H localhost:2 --log-dir " + dir + " --job train --timeline-filename " + dir +
                 "/train.json --timeline-mark-cycles --cycle-time-ms 1 --fusion-threshold-mb 1",
             kPython + " " + kProgram);
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  const std::string trace = ReadText(dir + "/train.json");
  EXPECT_NE(trace.find("GLOO_ALLREDUCE"), std::string::npos) << trace.substr(0, 500);
  EXPECT_NE(trace.find("CYCLE_START"), std::string::npos) << trace.substr(0, 500);

  // -prefix-timestamp: each console line starts with the local time as horovodrun writes it
  // (time.asctime()), then the rank; dtrain's rank log keeps the line as the rank wrote it.
  const std::regex stamped(
      R"((?:^|\n)[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4})"
      R"(\[(0|localhost:0)\]( |<stdout>:)stamped line)");
  const std::string say = " python -c 'print(\"stamped line\")' 2>&1; echo status=$?";
  const std::string theirs =
      RunOutput(kBareEnv + kVenvBin + "/horovodrun -np 1 -H localhost:1 -prefix-timestamp" + say);
  EXPECT_TRUE(std::regex_search(theirs, stamped)) << theirs;
  const std::string ours =
      RunOutput(kBareEnv + kBin + "/dtrain launch -np 1 -H localhost:1 --log-dir " + dir +
                " --job stamped -prefix-timestamp" + say);
  EXPECT_TRUE(std::regex_search(ours, stamped)) << ours;
  const std::string log = RankLog(dir + "/stamped", 0);
  EXPECT_NE(log.find("stamped line"), std::string::npos) << log;
  EXPECT_FALSE(std::regex_search(log, stamped)) << log;
}

// horovodrun's --output-filename DIR: horovodrun itself and dtrain run the same command, and
// each rank's DIR/rank.R/stdout and stderr hold the same bytes (lines after [R]<stdout>:, a last
// line without a newline as it came).
TEST(HorovodLaunch, OutputFilenameWritesWhatHorovodrunWrites) {
  REQUIRE_HOROVOD();
  const std::string dir = kBin + "/horovod_launch/output";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string command =
      " sh -c 'echo \"out $HOROVOD_RANK\"; echo \"err $HOROVOD_RANK\" >&2; printf tail' 2>&1; "
      "echo status=$?";
  const std::string theirs = RunOutput(kBareEnv + kVenvBin + "/horovodrun -np 2 -H localhost:2 " +
                                       "--output-filename " + dir + "/theirs" + command);
  ASSERT_NE(theirs.find("status=0"), std::string::npos) << theirs;
  const std::string ours =
      RunOutput(kBareEnv + kBin + "/dtrain launch -np 2 -H localhost:2 --log-dir " + dir +
                " --job out --output-filename " + dir + "/ours" + command);
  ASSERT_NE(ours.find("status=0"), std::string::npos) << ours;
  for (const char* rank : {"0", "1"}) {
    for (const char* stream : {"stdout", "stderr"}) {
      const std::string file = std::string("/rank.") + rank + "/" + stream;
      const std::string want = ReadText(dir + "/theirs" + file);
      EXPECT_FALSE(want.empty()) << file;
      EXPECT_EQ(ReadText(dir + "/ours" + file), want) << file;
    }
  }
  EXPECT_EQ(ReadText(dir + "/ours/rank.1/stdout"), "[1]<stdout>:out 1\n[1]<stdout>:tail");
  EXPECT_NE(RankLog(dir + "/out", 1).find("out 1\n"), std::string::npos) << "the log as always";
}

TEST(HorovodLaunch, ADeadRankStopsTheOthersFast) {
  REQUIRE_HOROVOD();
  const std::string dir = kBin + "/horovod_launch/dies";
  fs::remove_all(dir);
  const auto start = std::chrono::steady_clock::now();
  const std::string out =
      Launch("--horovod -H localhost:2 -x HVD_TEST_DIE_RANK=1 --grace-period 2 --log-dir " + dir +
                 " --job hvd",
             kPython + " " + kProgram);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(out.find("status=3"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 on node localhost failed: exit 3"), std::string::npos) << out;
  EXPECT_LT(took, 90) << "rank 0 blocks in an allreduce without rank 1; dtrain must stop it";
  EXPECT_EQ(RankLog(dir + "/hvd", 0).find("hvd-allreduce exact=1"), std::string::npos);
}

// OpenCLIP's `--horovod` path: hvd.init(), hvd.DistributedOptimizer, Horovod's allgather in the
// loss. The tiny CSV + PNG set is written here with PIL; dtrain launch sees `--horovod` in the
// command and serves the rendezvous without being asked.
TEST(HorovodLaunch, OpenClipTrainsWithHorovodOnTwoLocalRanks) {
  REQUIRE_HOROVOD();
  if (RunOutput(kPython + " -c 'import open_clip_train.main' 2>&1; echo rc=$?").find("rc=0") ==
      std::string::npos) {
    FAIL() << kPython << " cannot import open_clip_train: run scripts/install-deps.sh --tests";
  }
  const std::string dir = kBin + "/horovod_launch/openclip";
  fs::remove_all(dir);
  fs::create_directories(dir + "/work");
  const std::string made = RunOutput(
      kPython +
      " -c \"import PIL.Image as I, random\n"
      "random.seed(0)\nnames=['a red square','a blue circle','a green line','a dark box']\n"
      "rows=['filepath\\ttitle']\n"
      "for i in range(64):\n"
      "  p='" +
      dir +
      "/img%d.png' % i\n"
      "  I.new('RGB',(32,32),tuple(random.randrange(256) for _ in range(3))).save(p)\n"
      "  rows.append(p+'\\t'+names[i%4])\n"
      "open('" +
      dir + "/train.csv','w').write('\\n'.join(rows)+'\\n')\" 2>&1; echo rc=$?");
  ASSERT_NE(made.find("rc=0"), std::string::npos) << made;
  std::ofstream(dir + "/work/hvd_openclip.py")
      << "import os\nimport open_clip, open_clip.loss\n"
      << "open_clip.add_model_config('" << kSource << "/tests/open_clip/fmnist-tiny-bpe.json')\n"
      << "_forward = open_clip.loss.ClipLoss.forward\n"
      << "def forward(self, *args, **kwargs):\n"
      << "    out = _forward(self, *args, **kwargs)\n"
      << "    total = sum(out.values()) if isinstance(out, dict) else out\n"
      << "    print(f\"rank {os.environ['HOROVOD_RANK']} loss {float(total):.4f}\", flush=True)\n"
      << "    return out\n"
      << "open_clip.loss.ClipLoss.forward = forward\n"
      // open_clip_train 3.3.0's CSV loader builds DistributedSampler(dataset), which asks
      // torch.distributed for rank and size; in --horovod mode that is never initialised. Hand
      // it Horovod's, as a user of that mode must.
      << "import horovod.torch as hvd, torch.utils.data.distributed as tud\n"
      << "_sampler_init = tud.DistributedSampler.__init__\n"
      << "def sampler_init(self, dataset, num_replicas=None, rank=None, *args, **kwargs):\n"
      << "    _sampler_init(self, dataset, hvd.size() if num_replicas is None else num_replicas,\n"
      << "                  hvd.rank() if rank is None else rank, *args, **kwargs)\n"
      << "tud.DistributedSampler.__init__ = sampler_init\n";
  std::ofstream(dir + "/train.py") << "import sys\nimport hvd_openclip\n"
                                   << "from open_clip_train.main import main\nmain(sys.argv[1:])\n";
  std::ofstream(dir + "/cluster.yaml")
      << "transport: local\nnodes:\n  - {host: localhost, slots: 2}\n"
      << "workdir: " << dir << "/work\n";
  const std::string out =
      Launch("-c " + dir + "/cluster.yaml --log-dir " + dir + "/logs --job clip",
             kPython + " " + dir + "/train.py --horovod --train-data " + dir +
                 "/train.csv --dataset-type csv --model fmnist-tiny-bpe --batch-size 8 --epochs 1"
                 " --workers 0 --device cpu --precision fp32 --lr 1e-3 --warmup 1 --seed 0"
                 " --log-every-n-steps 1 --save-frequency 0 --name run --logs " +
                 dir + "/openclip");
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  EXPECT_NE(out.find("Horovod Gloo rendezvous on"), std::string::npos) << out;
  std::vector<std::string> losses[2];
  for (int r = 0; r < 2; ++r) {
    const std::string log = RankLog(dir + "/logs/clip", r);
    const std::regex line("rank " + std::to_string(r) + " loss ([0-9.]+)");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
         ++it)
      losses[r].push_back((*it)[1]);
    // 64 samples, 8 per rank per step, 2 ranks: 4 steps each.
    EXPECT_EQ(losses[r].size(), 4u) << "rank " << r << ":\n" << log;
    EXPECT_NE(log.find("Running in horovod mode"), std::string::npos) << log;
  }
  // Each rank sees other images, but OpenCLIP's loss is over the features of all ranks
  // (hvd.allgather): the same number on both ranks at every step.
  EXPECT_EQ(losses[0], losses[1]);
}

// The doctor's probe reads Horovod's build on each node (what `horovodrun --check-build`
// prints): frameworks torch, controller gloo, tensor operations gloo for the wheel built here.
TEST(HorovodDoctor, ReportsHorovodsBuildOnEveryNode) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("s21-doctor-2x1", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = cluster.dir() + "/cluster-hvd.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file()) << "python: " << kPython << "\n"
                      << "job: {command: [true]}\n";
  const std::string out = RunOutput(kBin + "/dtrain doctor -c " + file + " 2>&1; echo status=$?");
  const std::string json = RunOutput(kBin + "/dtrain doctor --json -c " + file + " 2>&1");
  const std::regex row("\\n(node[01]) .* 0\\.28\\.1 +torch/gloo/gloo ");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(out.begin(), out.end(), row), std::sregex_iterator()), 2)
      << out;
  EXPECT_NE(out.find("ok      Horovod's frameworks/controllers/tensor operations torch/gloo/gloo"),
            std::string::npos)
      << out;
  for (const char* fact : {"\"horovod_frameworks\": \"torch\"", "\"horovod_controllers\": \"gloo\"",
                           "\"horovod_ops\": \"gloo\""}) {
    const std::string text(fact);
    size_t count = 0;
    for (size_t at = json.find(text); at != std::string::npos; at = json.find(text, at + 1))
      ++count;
    EXPECT_EQ(count, 2u) << fact << " on both nodes:\n" << json;
  }
}

}  // namespace
}  // namespace dtrain
