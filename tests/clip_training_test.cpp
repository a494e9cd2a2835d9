// dtrain-clip train as a user runs it: real Fashion-MNIST, a few steps, metrics lines,
// checkpoints written, resumed, and the command line's errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/rank_file_path.h"
#include "tests/support/files.h"
#include "tests/support/test_paths.h"

namespace {

const std::string kClip = std::string(DTRAIN_BINARY_DIR) + "/dtrain-clip";

struct ClipRun {
  int status = -1;
  std::string output;
};

ClipRun RunClip(const std::string& args) {
  ClipRun run;
  std::string command = kClip + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

// The value of "key" in a flat JSON line, as written (number or quoted string).
std::string Field(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return "";
  at += key.size() + 3;
  auto end = line.find_first_of(",}", at);
  return line.substr(at, end - at);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// step -> loss as written, for step lines.
std::map<int, std::string> Losses(const std::vector<std::string>& lines) {
  std::map<int, std::string> losses;
  for (const auto& line : lines) {
    if (Field(line, "event").empty()) losses[std::stoi(Field(line, "step"))] = Field(line, "loss");
  }
  return losses;
}

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/clip_training_" + name;
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

TEST(ClipTrain, ShortRunOnFashionMnistLowersTheLoss) {
  std::string dir = FreshDir("short");
  ClipRun run = RunClip(
      "train --train-num-samples 3072 --batch-size 64 --threads 2 --lr 2e-3 "
      "--warmup 5 --zeroshot-samples 1000 --save-frequency 0 --logs " +
      dir);
  ASSERT_EQ(run.status, 0) << run.output;
  auto lines = Lines(dir + "/metrics/rank-0.jsonl");
  auto losses = Losses(lines);
  ASSERT_EQ(losses.size(), 48u) << run.output;
  double first = 0, last = 0;
  for (int s = 1; s <= 3; ++s) first += std::stod(losses[s]) / 3;
  for (int s = 46; s <= 48; ++s) last += std::stod(losses[s]) / 3;
  // ln(64) = 4.16 at chance; measured: about 4.15 -> 3.5 over these 48 steps.
  EXPECT_LT(last, first - 0.3) << "loss did not fall: first " << first << ", last " << last;
  // An eval line with top-1 clearly above chance (0.1 +- 0.01 on 1000 images), then the end.
  ASSERT_GE(lines.size(), 50u);
  EXPECT_EQ(Field(lines[lines.size() - 2], "event"), "\"eval\"");
  EXPECT_GT(std::stod(Field(lines[lines.size() - 2], "zeroshot_top1")), 0.15);
  EXPECT_EQ(Field(lines.back(), "event"), "\"end\"");
  EXPECT_EQ(Field(lines.back(), "param_hash").size(), 18u);  // 16 hex digits in quotes
  EXPECT_FALSE(Field(lines.back(), "samples_per_s").empty());
  EXPECT_FALSE(Field(lines[0], "lr").empty());
}

TEST(ClipTrain, ResumeGivesTheSameNextStepLossAndWeights) {
  const std::string common =
      "train --train-num-samples 512 --batch-size 64 --epochs 2 --threads 2 --warmup 2 "
      "--zeroshot-frequency 0 --save-most-recent --accum-freq 2 ";
  // Uninterrupted: 2 epochs of 4 steps.
  std::string straight = FreshDir("straight");
  ClipRun a = RunClip(common + "--logs " + straight);
  ASSERT_EQ(a.status, 0) << a.output;
  // Stopped after epoch 1 (its checkpoint written), then resumed from epoch_latest.pt.
  std::string resumed = FreshDir("resumed");
  ClipRun b = RunClip(common + "--max-steps 4 --logs " + resumed);
  ASSERT_EQ(b.status, 0) << b.output;
  ASSERT_EQ(std::system(("test -s " + resumed + "/checkpoints/epoch_1.pt").c_str()), 0);
  ASSERT_EQ(std::system(("test -s " + resumed + "/checkpoints/epoch_latest.pt").c_str()), 0);
  // A half-written save (a temp file) must not be taken for a checkpoint.
  std::ofstream(resumed + "/checkpoints/epoch_2.pt.tmp.12345") << "partial";
  ClipRun c = RunClip(common + "--resume latest --logs " + resumed);
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;

  auto la = Lines(straight + "/metrics/rank-0.jsonl");
  auto lc = Lines(resumed + "/metrics/rank-0.jsonl");
  auto loss_a = Losses(la), loss_c = Losses(lc);
  ASSERT_EQ(loss_a.size(), 8u);
  ASSERT_TRUE(loss_c.count(5)) << c.output;
  EXPECT_EQ(loss_c[5], loss_a[5]);
  EXPECT_EQ(loss_c[8], loss_a[8]);
  EXPECT_EQ(Field(lc.back(), "param_hash"), Field(la.back(), "param_hash"));
}

// --cuda-graphs on, on the CPU: the static-buffer step (fused AdamW, step counts on the device)
// trains, and a run stopped after epoch 1 and resumed ends with the uninterrupted run's weights:
// the checkpoint holds the fused optimizer's moments and step counts. A run the step cannot be
// captured for is refused with the reason.
TEST(ClipTrain, CudaGraphsStaticStepResumesToTheSameWeights) {
  const std::string common =
      "train --dataset-type synthetic --train-num-samples 256 --batch-size 32 --epochs 2 "
      "--threads 2 --warmup 2 --zeroshot-frequency 0 --save-most-recent --cuda-graphs on ";
  std::string straight = FreshDir("graphs-straight");
  ClipRun a = RunClip(common + "--logs " + straight);
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("cuda-graphs on: static-buffer step"), std::string::npos) << a.output;
  std::string resumed = FreshDir("graphs-resumed");
  ClipRun b = RunClip(common + "--max-steps 8 --logs " + resumed);
  ASSERT_EQ(b.status, 0) << b.output;
  ClipRun c = RunClip(common + "--resume latest --logs " + resumed);
  ASSERT_EQ(c.status, 0) << c.output;
  auto la = Lines(straight + "/metrics/rank-0.jsonl");
  auto lc = Lines(resumed + "/metrics/rank-0.jsonl");
  auto loss_a = Losses(la), loss_c = Losses(lc);
  ASSERT_EQ(loss_a.size(), 16u);
  ASSERT_TRUE(loss_c.count(9)) << c.output;
  EXPECT_EQ(loss_c[9], loss_a[9]);
  EXPECT_EQ(loss_c[16], loss_a[16]);
  EXPECT_EQ(Field(lc.back(), "param_hash"), Field(la.back(), "param_hash"));
  EXPECT_EQ(Field(la.back(), "graph_replays"), "13");  // 16 steps, the first 3 warm-up
  EXPECT_EQ(Field(la.back(), "graph_captured"), "false");

  ClipRun refused = RunClip(common + "--accum-freq 2 --logs " + FreshDir("graphs-refused"));
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("--cuda-graphs on: not possible with --accum-freq 2"),
            std::string::npos)
      << refused.output;
}

TEST(ClipTrain, CommandLineErrorsExitTwo) {
  ClipRun unknown = RunClip("train --batchsize 3");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("unknown flag '--batchsize'"), std::string::npos);
  EXPECT_EQ(RunClip("train --precision fp16").status, 2);
  EXPECT_EQ(RunClip("train --model rn50").status, 2);
  EXPECT_EQ(RunClip("frobnicate").status, 2);
  ClipRun help = RunClip("train --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("--accum-freq"), std::string::npos);
  ClipRun version = RunClip("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.output.rfind("dtrain-clip ", 0), 0u);
}

TEST(ClipTrain, NewExecutionFlagsRefuseBadValues) {
  for (const char* bad : {"--text-context some", "--profile-steps 0", "--profile-steps 5-3",
                          "--profile-steps a-b", "--profile-steps 3-"}) {
    ClipRun run = RunClip(std::string("train ") + bad);
    EXPECT_EQ(run.status, 2) << bad << ": " << run.output;
    EXPECT_NE(run.output.find(std::string(bad).substr(0, std::string(bad).find(' '))),
              std::string::npos)
        << run.output;
  }
}

// A short synthetic run into DIR/NAME with FLAGS added; the step losses of its metrics file.
std::map<int, std::string> SyntheticRunLosses(const std::string& dir, const std::string& name,
                                              int steps, const std::string& flags,
                                              std::string* output = nullptr) {
  ClipRun run = RunClip("train --dataset-type synthetic --batch-size 8 --train-num-samples " +
                        std::to_string(8 * steps) + " --max-steps " + std::to_string(steps) +
                        " --zeroshot-frequency 0 --save-frequency 0 --threads 1 --seed 4 --logs " +
                        dir + "/" + name + " " + flags);
  EXPECT_EQ(run.status, 0) << run.output;
  if (output) *output = run.output;
  return Losses(Lines(dir + "/" + name + "/metrics/rank-0.jsonl"));
}

// Every "param hash H" in `text` (the end line of a run, one per rank's log), in order.
std::vector<std::string> ParamHashes(const std::string& text) {
  std::vector<std::string> hashes;
  for (size_t at = 0; (at = text.find("param hash ", at)) != std::string::npos; ++at) {
    hashes.push_back(text.substr(at + 11, 16));
  }
  return hashes;
}

// A short synthetic run on two local ranks (Gloo) through `dtrain launch LAUNCH_FLAGS --log-dir
// LAUNCH_DIR`, the trainer given TRAIN_FLAGS; what both printed goes to LOG. Its exit status.
int LaunchTwoRanks(const std::string& dir, const std::string& launch_flags,
                   const std::string& launch_dir, const std::string& train_flags,
                   const std::string& log) {
  const std::string command =
      "cd " + dir + " && NPROC_PER_NODE=2 " + std::string(DTRAIN_BINARY_DIR) +
      "/dtrain launch --quiet " + launch_flags + " --log-dir " + launch_dir + " --job run -- " +
      kClip +
      " train --dataset-type synthetic --batch-size 8 --train-num-samples 96 "
      "--zeroshot-frequency 0 --save-frequency 0 --threads 1 " +
      train_flags + " > " + log + " 2>&1";
  return std::system(command.c_str());
}

// --profile-steps: the PyTorch profiler's Chrome trace of those steps, holding the step's
// operators, and the metrics lines unchanged: the same losses as a run without the profiler.
TEST(ClipTrain, ProfileStepsWritesAChromeTraceOfThoseSteps) {
  const std::string dir = FreshDir("profile");
  const auto plain = SyntheticRunLosses(dir, "plain", 5, "");
  std::string output;
  const auto profiled = SyntheticRunLosses(dir, "profiled", 5, "--profile-steps 2-3", &output);
  const std::string trace = dir + "/profiled/profiler/rank-0.pt.trace.json";
  EXPECT_NE(output.find("profile: steps 2-3 in " + trace), std::string::npos) << output;
  ASSERT_TRUE(std::filesystem::exists(trace)) << trace;
  const std::string text = dtrain::testing::ReadFile(trace);
  EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(text.find("\"cpu_op\""), std::string::npos);
  EXPECT_NE(text.find("aten::addmm"), std::string::npos);  // the blocks' projections ran in it
  EXPECT_EQ(profiled, plain);
  EXPECT_EQ(plain.size(), 5u);
  // dtrain timeline takes it as it takes a Python job's PyTorch trace.
  FILE* pipe = popen((std::string(DTRAIN_BINARY_DIR) + "/dtrain timeline --summary -i " + trace +
                      " -o " + dir + "/merged.json 2>&1")
                         .c_str(),
                     "r");
  std::string merged;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) merged.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << merged;
  EXPECT_NE(merged.find("merged 1 rank"), std::string::npos) << merged;
}

// --precision amp_bf16 on the CPU runs the GPU step's operators: bfloat16 autocast, the attention
// through SDPA with q, k and v split by QkvHeads (not the fused float32 CPU kernel), and trains
// like float32 up to bfloat16's rounding.
TEST(ClipTrain, Bf16AutocastOnTheCpuRunsTheGpuStepsOperators) {
  const std::string dir = FreshDir("bf16_cpu");
  const auto fp32 = SyntheticRunLosses(dir, "fp32", 3, "--profile-steps 2-2");
  const auto bf16 = SyntheticRunLosses(dir, "bf16", 3, "--precision amp_bf16 --profile-steps 2-2");
  ASSERT_EQ(fp32.size(), 3u);
  ASSERT_EQ(bf16.size(), 3u);
  for (const auto& [step, loss] : fp32) {
    EXPECT_NEAR(std::stod(bf16.at(step)), std::stod(loss), 0.02 * std::stod(loss))
        << "step " << step;
  }
  EXPECT_NE(bf16, fp32);  // bfloat16 did round
  auto trace = [&](const std::string& name) {
    const std::string path = dir + "/" + name + "/profiler/rank-0.pt.trace.json";
    EXPECT_TRUE(std::filesystem::exists(path)) << name;
    return dtrain::testing::ReadFile(path);
  };
  const std::string fp32_ops = trace("fp32"), bf16_ops = trace("bf16");
  EXPECT_NE(bf16_ops.find("scaled_dot_product"), std::string::npos);
  EXPECT_NE(bf16_ops.find("QkvHeads"), std::string::npos);
  EXPECT_EQ(bf16_ops.find("FusedSelfAttention"), std::string::npos);
  // float32 on the CPU keeps its fused attention.
  EXPECT_NE(fp32_ops.find("FusedSelfAttention"), std::string::npos);
  EXPECT_EQ(fp32_ops.find("scaled_dot_product"), std::string::npos);
}

// --weight-copies (on by default with amp_bf16 on one rank): the matrix weights cast to bfloat16
// once a step, not by autocast at each use. The same losses and weights bit for bit, with ~2
// fewer autograd casts per copied parameter in the profiled step.
TEST(ClipTrain, Bf16WeightCopiesTrainBitForBitWithFewerCasts) {
  const std::string dir = FreshDir("weight_copies");
  std::string on_output, off_output;
  const auto on =
      SyntheticRunLosses(dir, "on", 3, "--precision amp_bf16 --profile-steps 2-2", &on_output);
  const auto off = SyntheticRunLosses(
      dir, "off", 3, "--precision amp_bf16 --profile-steps 2-2 --weight-copies off", &off_output);
  ASSERT_EQ(on.size(), 3u);
  EXPECT_EQ(on, off);
  auto hash = [](const std::string& output) {
    const std::vector<std::string> hashes = ParamHashes(output);
    return hashes.empty() ? std::string("none") : hashes.front();
  };
  EXPECT_EQ(hash(on_output), hash(off_output)) << on_output << off_output;
  EXPECT_NE(hash(on_output), "none");
  EXPECT_NE(on_output.find("weight-copies: "), std::string::npos) << on_output;
  EXPECT_EQ(off_output.find("weight-copies: "), std::string::npos) << off_output;
  auto casts = [&](const std::string& name) {
    const std::string text =
        dtrain::testing::ReadFile(dir + "/" + name + "/profiler/rank-0.pt.trace.json");
    int count = 0;
    for (size_t at = 0; (at = text.find("\"ToCopyBackward0\"", at)) != std::string::npos; ++at) {
      ++count;
    }
    return count;
  };
  const int casts_on = casts("on"), casts_off = casts("off");
  std::printf("ToCopyBackward0 in a profiled step: %d with copies, %d without\n", casts_on,
              casts_off);
  EXPECT_LT(casts_on * 3, casts_off);
  // Micro-batches: each copy's gradient added into the float32 one as backward makes it, so
  // they add up in float32 as autocast's widened gradients do.
  std::string accum_on, accum_off;
  const auto accum =
      SyntheticRunLosses(dir, "accum_on", 3, "--precision amp_bf16 --accum-freq 2", &accum_on);
  EXPECT_EQ(accum, SyntheticRunLosses(dir, "accum_off", 3,
                                      "--precision amp_bf16 --accum-freq 2 --weight-copies off",
                                      &accum_off));
  EXPECT_EQ(hash(accum_on), hash(accum_off));
  EXPECT_NE(accum_on.find("added into the float32 ones as backward makes them"), std::string::npos)
      << accum_on;
}

// Two ranks (Gloo, through dtrain launch --timeline): each copy's gradient goes into its float32
// gradient as backward makes it and is marked ready for the gradient sync there (its QUEUE span
// starts before BACKWARD ends, as with autocast's casts). Both ranks end with the weights of the
// same job run with autocast's casts, bit for bit.
TEST(ClipTrain, Bf16WeightCopiesOnTwoRanksTrainBitForBitLikeAutocastsCasts) {
  const std::string dir = FreshDir("weight_copies_ranks");
  auto launch = [&](const std::string& name, const std::string& flags) {
    const std::string log = dir + "/" + name + ".log";
    EXPECT_EQ(LaunchTwoRanks(dir, "--timeline", dir + "/" + name + "-launch",
                             "--max-steps 4 --seed 4 --precision amp_bf16 --logs " + dir + "/" +
                                 name + " " + flags,
                             log),
              0)
        << dtrain::testing::ReadFile(log);
    // Each rank's "done: ... param hash H" line, from the rank logs.
    std::vector<std::string> hashes;
    std::string notes;
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(dir + "/" + name + "-launch")) {
      if (!entry.is_regular_file()) continue;
      const std::string text = dtrain::testing::ReadFile(entry.path().string());
      for (const std::string& h : ParamHashes(text)) hashes.push_back(h);
      if (text.find("weight-copies: ") != std::string::npos) notes += text;
    }
    std::sort(hashes.begin(), hashes.end());
    return std::make_pair(hashes, notes);
  };
  const auto [on, on_notes] = launch("on", "");
  const auto [off, off_notes] = launch("off", "--weight-copies off");
  ASSERT_EQ(on.size(), 2u) << "a hash from each rank";
  EXPECT_EQ(on[0], on[1]);
  EXPECT_EQ(on, off);
  EXPECT_NE(on_notes.find("added into the float32 ones as backward makes them"), std::string::npos)
      << on_notes;
  EXPECT_TRUE(off_notes.empty()) << off_notes;
  // Rank 0's timeline: for parameters with a copy (and one without, for the same rule), the
  // first QUEUE span of the gradient sync begins inside the first BACKWARD span.
  const nlohmann::json trace =
      nlohmann::json::parse(dtrain::testing::ReadFile(dir + "/on-launch/run/timeline/rank-0.json"));
  std::map<std::string, int64_t> pid_of;
  int64_t backward_end = -1;
  for (const auto& event : trace) {
    if (event.value("name", "") == "process_name") {
      pid_of[event["args"]["name"].get<std::string>()] = event["pid"].get<int64_t>();
    }
    if (backward_end < 0 && event.value("name", "") == "BACKWARD" && event.value("ph", "") == "E") {
      backward_end = event["ts"].get<int64_t>();
    }
  }
  ASSERT_GT(backward_end, 0);
  for (const char* track :
       {"visual.proj", "text.text_projection", "visual.transformer.resblocks.0.mlp.c_fc.weight",
        "visual.ln_post.weight"}) {
    ASSERT_TRUE(pid_of.count(track)) << track;
    int64_t first_queue = -1;
    for (const auto& event : trace) {
      if (event.value("pid", int64_t{-1}) == pid_of[track] && event.value("name", "") == "QUEUE" &&
          event.value("ph", "") == "B") {
        first_queue = event["ts"].get<int64_t>();
        break;
      }
    }
    EXPECT_GE(first_queue, 0) << track;
    EXPECT_LT(first_queue, backward_end) << track << ": marked ready only after backward";
  }
}

TEST(RankFilePath, TheRankGoesBeforeTheExtensionWithMoreThanOneRank) {
  EXPECT_EQ(dtrain::clip::RankFilePath("/t/trace.json", 1, 2), "/t/trace.rank-1.json");
  EXPECT_EQ(dtrain::clip::RankFilePath("/t/trace.json", 0, 1), "/t/trace.json");
  EXPECT_EQ(dtrain::clip::RankFilePath("trace", 3, 4), "trace.rank-3");
  EXPECT_EQ(dtrain::clip::RankFilePath("/a.b/trace", 0, 2), "/a.b/trace.rank-0");
  EXPECT_EQ(dtrain::clip::RankFilePath("/t/.trace", 1, 2), "/t/.trace.rank-1");
  EXPECT_EQ(dtrain::clip::RankFilePath("r.pt.trace.json", 1, 2), "r.pt.trace.rank-1.json");
}

// --timeline-path, --metrics-file and --profile-file given alike to two ranks (as a launcher
// passes one command line): a file per rank, each whole (both timelines parse), where one shared
// file had the two ranks' writes interleaved.
TEST(ClipTrain, FilesNamedAlikeOnTwoRanksBecomeOneFilePerRank) {
  const std::string dir = FreshDir("rank_files");
  ASSERT_EQ(LaunchTwoRanks(dir, "", dir + "/launch",
                           "--max-steps 3 --logs " + dir + "/logs --timeline-path " + dir +
                               "/trace.json --metrics-file " + dir +
                               "/m.jsonl --profile-steps 2-2 --profile-file " + dir + "/p.json",
                           dir + "/out.log"),
            0)
      << dtrain::testing::ReadFile(dir + "/out.log");
  EXPECT_FALSE(std::filesystem::exists(dir + "/trace.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/m.jsonl"));
  for (int rank : {0, 1}) {
    const std::string r = std::to_string(rank);
    const std::string trace = dtrain::testing::ReadFile(dir + "/trace.rank-" + r + ".json");
    EXPECT_TRUE(nlohmann::json::accept(trace)) << "rank " << r;
    EXPECT_NE(trace.find("\"rank\":" + r), std::string::npos);
    EXPECT_EQ(Losses(Lines(dir + "/m.rank-" + r + ".jsonl")).size(), 3u) << "rank " << r;
    EXPECT_TRUE(nlohmann::json::accept(dtrain::testing::ReadFile(dir + "/p.rank-" + r + ".json")));
  }
}

// --text-context whole computes every text position: the same features up to rounding, so the
// losses agree closely with the default cut (not bit for bit: other matrix shapes).
TEST(ClipTrain, WholeTextContextTrainsLikeTheCut) {
  const std::string dir = FreshDir("whole_text");
  auto cut = SyntheticRunLosses(dir, "cut", 3, "");
  auto whole = SyntheticRunLosses(dir, "whole", 3, "--text-context whole");
  ASSERT_EQ(cut.size(), 3u);
  ASSERT_EQ(whole.size(), 3u);
  for (const auto& [step, loss] : cut) {
    EXPECT_NEAR(std::stod(loss), std::stod(whole[step]), 1e-4) << "step " << step;
  }
}

TEST(ClipTrain, MissingDataIsAnErrorNamingThePath) {
  ClipRun run = RunClip("train --train-data /nonexistent/fmnist --logs " + FreshDir("missing"));
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.output.find("/nonexistent/fmnist"), std::string::npos) << run.output;
}

TEST(ClipTrain, SamplerPadKeepsTheRemainderThatDropLastDrops) {
  // 100 samples in batches of 64: drop-last trains one step, --sampler-pad two (64 + 36).
  const std::string common =
      "train --train-num-samples 100 --batch-size 64 --threads 1 --zeroshot-frequency 0 "
      "--save-frequency 0 --logs ";
  std::string dropped = FreshDir("drop_last"), padded = FreshDir("pad");
  ClipRun a = RunClip(common + dropped);
  ASSERT_EQ(a.status, 0) << a.output;
  ClipRun b = RunClip(common + padded + " --sampler-pad");
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_EQ(Losses(Lines(dropped + "/metrics/rank-0.jsonl")).size(), 1u) << a.output;
  EXPECT_EQ(Losses(Lines(padded + "/metrics/rank-0.jsonl")).size(), 2u) << b.output;
}

}  // namespace

// --pixels uint8: the loaders hand over 8-bit pixels and the trainer normalises them (on the CPU
// here; on CUDA after a pinned copy on its own stream). The same samples give the same losses as
// the loaders' float path, up to float rounding of the two normalisations.
TEST(ClipTrain, Uint8PixelsNormalisedByTheTrainerGiveTheFloatPathsLosses) {
  std::map<std::string, std::map<int, std::string>> losses;
  for (const std::string pixels : {"float", "uint8"}) {
    std::string dir = FreshDir("pixels_" + pixels);
    ClipRun run = RunClip("train --train-num-samples 256 --batch-size 32 --threads 2 --max-steps 4 "
                          "--zeroshot-frequency 0 --save-frequency 0 --pixels " + pixels +
                          " --logs " + dir);
    ASSERT_EQ(run.status, 0) << run.output;
    losses[pixels] = Losses(Lines(dir + "/metrics/rank-0.jsonl"));
    ASSERT_EQ(losses[pixels].size(), 4u) << run.output;
  }
  for (int step = 1; step <= 4; ++step) {
    EXPECT_NEAR(std::stod(losses["float"][step]), std::stod(losses["uint8"][step]), 1e-4)
        << "step " << step;
  }
  EXPECT_EQ(RunClip("train --pixels half").status, 2);
}
