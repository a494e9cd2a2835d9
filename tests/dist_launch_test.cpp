// dtrain-clip through `dtrain launch`: two local ranks on Fashion-MNIST (Gloo) end with identical
// parameters; a rank killed mid-training brings the job down and --max-restarts 1 with
// --resume latest finishes it from the last checkpoint; a rank stopped mid-training is named by
// the stall watch with the collective the others wait in.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/metrics_lines.h"
#include "tests/support/process_state.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/test_paths.h"

namespace {

namespace fs = std::filesystem;
using dtrain::test::EndLines;
using dtrain::test::Field;
const std::string kBin = DTRAIN_BINARY_DIR;

std::string TempDir() {
  return dtrain::testing::ScratchDirs::Make("dtrain-dist-launch");
}

int RunShell(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const std::string kTrain =
    " train --batch-size 32 --zeroshot-frequency 0 --gather-with-grad --threads 1";

TEST(DistLaunch, TwoRanksEndWithIdenticalParameters) {
  std::string dir = TempDir();
  int code = RunShell("cd " + dir + " && NPROC_PER_NODE=2 " + kBin + "/dtrain launch --quiet " +
                      "--timeline --log-dir " + dir + "/logs --job e2e -- " + kBin +
                      "/dtrain-clip" + kTrain + " --max-steps 5 --save-frequency 0 " +
                      "--timeline-mark-cycles --logs " + dir + "/ck > " + dir + "/launch.log 2>&1");
  ASSERT_EQ(code, 0) << "see " << dir << "/launch.log";
  auto ends = EndLines(dir);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "param_hash"), Field(ends["rank-1.jsonl"], "param_hash"));
  EXPECT_FALSE(Field(ends["rank-0.jsonl"], "param_hash").empty());
  EXPECT_EQ(Field(ends["rank-1.jsonl"], "step"), "5");
  // The heartbeat's own bill (what bench/heartbeat_cost.sh adds up): its writer ran, and the
  // time in its setters on the step's path was counted.
  for (const char* rank : {"rank-0.jsonl", "rank-1.jsonl"}) {
    ASSERT_FALSE(Field(ends[rank], "heartbeat_beats").empty()) << ends[rank];
    EXPECT_GE(std::stoll(Field(ends[rank], "heartbeat_beats")), 1) << ends[rank];
    EXPECT_GT(std::stod(Field(ends[rank], "heartbeat_path_ms")), 0) << ends[rank];
    EXPECT_GE(std::stod(Field(ends[rank], "heartbeat_writer_cpu_ms")), 0) << ends[rank];
  }
  // Every rank wrote its trace, and --timeline-mark-cycles marked the gradient cycles in it.
  for (const char* rank : {"0", "1"}) {
    std::ifstream trace(dir + "/logs/e2e/timeline/rank-" + rank + ".json");
    std::string text((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"CYCLE_START\""), std::string::npos) << "rank " << rank;
    EXPECT_NE(text.find("\"GLOO_ALLREDUCE\""), std::string::npos) << "rank " << rank;
  }
}

// --cuda-graphs on with two ranks: the static-buffer step a graph can hold, gradients averaged by
// a fixed sequence of allreduces after backward instead of the host-agreed sync (on the CPU with
// Gloo the same step runs eagerly). The ranks see different batches, so only a working average
// keeps their weights identical; --gather-with-grad sends the loss' gradient through the gather.
TEST(DistLaunch, TwoRanksOfTheStaticGraphStepEndWithIdenticalParameters) {
  std::string dir = TempDir();
  int code =
      RunShell("cd " + dir + " && NPROC_PER_NODE=2 " + kBin + "/dtrain launch --quiet " +
               "--log-dir " + dir + "/logs --job graphs -- " + kBin + "/dtrain-clip" + kTrain +
               " --max-steps 6 --save-frequency 0 --cuda-graphs on " +
               "--fusion-threshold-mb 0.05 --logs " + dir + "/ck > " + dir + "/launch.log 2>&1");
  ASSERT_EQ(code, 0) << "see " << dir << "/launch.log";
  auto ends = EndLines(dir);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_FALSE(Field(ends["rank-0.jsonl"], "param_hash").empty());
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "param_hash"), Field(ends["rank-1.jsonl"], "param_hash"));
  for (const char* rank : {"rank-0.jsonl", "rank-1.jsonl"}) {
    EXPECT_EQ(Field(ends[rank], "step"), "6") << ends[rank];
    EXPECT_EQ(Field(ends[rank], "graph_replays"), "3") << ends[rank];  // 3 warm-up steps first
    // The tiny model's gradients cut at 50 KiB: more than one bucket, the same count everywhere.
    EXPECT_GT(std::stoll("0" + Field(ends[rank], "graph_sync_buckets")), 1) << ends[rank];
  }
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "graph_sync_buckets"),
            Field(ends["rank-1.jsonl"], "graph_sync_buckets"));
  std::ifstream log(dir + "/logs/graphs/rank-0.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("fixed sequence of gloo allreduces"), std::string::npos) << text;
}

// A dtrain-clip job's store is dtrain's, as a Python job's is: `dtrain-clip store` on node 0,
// named on the console, every rank its client (TORCHELASTIC_USE_AGENT_STORE=True), rank 0
// included. And torch's own Python client speaks to that server.
TEST(DistLaunch, TheJobsStoreIsDtrainClipStore) {
  std::string dir = TempDir();
  int code = RunShell("cd " + dir + " && NPROC_PER_NODE=2 " + kBin + "/dtrain launch --quiet " +
                      "--log-dir " + dir + "/logs --job store -- " + kBin + "/dtrain-clip" +
                      kTrain + " --max-steps 2 --save-frequency 0 --logs " + dir + "/ck > " + dir +
                      "/launch.log 2>&1");
  std::ifstream in(dir + "/launch.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(code, 0) << log;
  EXPECT_NE(log.find("dtrain: the job's TCPStore on 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("/dtrain-clip on node localhost)"), std::string::npos) << log;
  EXPECT_EQ(EndLines(dir).size(), 2u) << "both ranks trained";
  // Rank 0 does not try to host it too (LibTorch would log the failed bind and go on as a client).
  std::ifstream rank0(dir + "/logs/store/rank-0.log");
  const std::string rank0_log((std::istreambuf_iterator<char>(rank0)),
                              std::istreambuf_iterator<char>());
  EXPECT_EQ(rank0_log.find("failed to bind"), std::string::npos) << rank0_log;
  EXPECT_NE(rank0_log.find("done: 2 steps"), std::string::npos) << rank0_log;

  const std::string python = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/python";
  ASSERT_TRUE(fs::exists(python)) << python << " missing: run scripts/install-deps.sh";
  std::ofstream(dir + "/client.sh")
      << "port=$(" << python
      << " -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); "
         "print(s.getsockname()[1])')\n"
      << kBin << "/dtrain-clip store --host 127.0.0.1 --port $port > " << dir
      << "/store.out & pid=$!\n"
      << "until grep -q dtrain-job-store-ready " << dir
      << "/store.out; do kill -0 $pid || exit 9; sleep 0.05; done\n"
      << python
      << " -c 'import sys, datetime, torch.distributed as d; s = d.TCPStore(\"127.0.0.1\", "
         "int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=30)); "
         "s.set(\"k\", \"v\"); print(\"got\", s.get(\"k\").decode(), s.add(\"n\", 2))' $port || "
         "exit 8\n"
      << "kill -TERM $pid; wait $pid\n";
  EXPECT_EQ(RunShell("sh " + dir + "/client.sh > " + dir + "/client.out 2>&1"), 0);
  std::ifstream client(dir + "/client.out");
  const std::string said((std::istreambuf_iterator<char>(client)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("got v 2\n"), std::string::npos) << said;
}

TEST(DistLaunch, KilledRankRestartsAndResumesFromTheLastCheckpoint) {
  std::string dir = TempDir();
  // Rank 1 of the first attempt is killed once epoch 1's checkpoint exists.
  std::string clip = kBin + "/dtrain-clip" + kTrain +
                     " --epochs 6 --train-num-samples 192 --save-frequency 1 --resume latest"
                     " --logs " +
                     dir + "/ck";
  std::ofstream(dir + "/rank.sh") << "if [ \"$RANK\" = 1 ] && [ ! -e " << dir << "/killed ]; then\n"
                                  << "  touch " << dir << "/killed\n"
                                  << "  " << clip << " & pid=$!\n"
                                  << "  while [ ! -e " << dir
                                  << "/ck/checkpoints/epoch_1.pt ]; do sleep 0.05; done\n"
                                  << "  kill -9 $pid; wait $pid; exit 137\n"
                                  << "fi\n"
                                  << "exec " << clip << "\n";
  int code = RunShell("cd " + dir + " && NPROC_PER_NODE=2 " + kBin + "/dtrain launch --quiet " +
                      "--max-restarts 1 --log-dir " + dir + "/logs --job restart -- sh " + dir +
                      "/rank.sh > " + dir + "/launch.log 2>&1");
  ASSERT_EQ(code, 0) << "see " << dir << "/launch.log";
  EXPECT_TRUE(fs::exists(dir + "/killed"));
  EXPECT_TRUE(fs::exists(dir + "/ck/checkpoints/epoch_6.pt"));
  auto ends = EndLines(dir);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "param_hash"), Field(ends["rank-1.jsonl"], "param_hash"));
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "step"), "18");
}

}  // namespace

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// A dtrain-clip rank stopped (SIGSTOP) mid-training: the stall watch sees its heartbeat stand
// still while the others wait in a collective, names it and that collective, and --on-stall stop
// ends the job with 124, the stopped rank named last.
TEST(DistLaunch, StoppedClipRankIsNamedWithTheCollectiveTheOthersWaitIn) {
  std::string dir = TempDir();
  const std::string job = dir + "/logs/clip-stop";
  const std::string out = dir + "/launch.out";
  const std::string command =
      "cd " + dir + " && NPROC_PER_NODE=3 " + kBin + "/dtrain launch --log-dir " + dir +
      "/logs --job clip-stop --stall-timeout 6 --on-stall stop -- " + kBin + "/dtrain-clip" +
      kTrain +
      " --dataset-type synthetic --train-num-samples 100000 --max-steps 100000 --save-frequency 0" +
      " > " + out + " 2>&1; echo $? > " + dir + "/status";
  std::thread launch([&] { RunShell(command); });
  // Rank 1 has taken a few steps: stop it where it is.
  std::string pid;
  for (int i = 0; i < 600 && pid.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto beat = dtrain::test::HeartbeatFields(job + "/heartbeat/rank-1.txt");
    if (std::atoll(beat["step"].c_str()) >= 3) pid = beat["pid"];
  }
  ASSERT_FALSE(pid.empty()) << "rank 1 never reached step 3:\n" << Slurp(out);
  ASSERT_EQ(::kill(std::stoi(pid), SIGSTOP), 0);
  launch.join();
  EXPECT_EQ(Slurp(dir + "/status"), "124\n") << Slurp(out);
  const std::string report = Slurp(job + "/stall-1.txt");
  EXPECT_NE(report.find("the job waits for rank 1"), std::string::npos) << report;
  EXPECT_NE(report.find(" in ALL"), std::string::npos) << report;  // ALLREDUCE or ALLGATHER
  EXPECT_NE(report.find("rank 1 on "), std::string::npos) << report;
  std::string console = Slurp(out);
  while (!console.empty() && console.back() == '\n') console.pop_back();
  const std::string last_line = console.substr(console.rfind('\n') + 1);
  EXPECT_NE(last_line.find("rank 1"), std::string::npos) << console;
  // Gone, or a zombie waiting for this sandbox's init to reap it: give the kill a moment.
  auto alive = [&] {
    const char state = dtrain::testing::ProcessState(std::stoi(pid));
    return state != 0 && state != 'Z';
  };
  for (int i = 0; i < 50 && alive(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(alive()) << "the stopped rank " << pid << " is still there";
}
