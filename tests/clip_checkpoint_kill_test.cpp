// A checkpoint save killed half-way: dtrain-clip is SIGKILLed the moment its temp file for
// epoch_latest.pt appears (inotify), so the kill lands inside the save. The previous
// epoch_latest.pt must still load, --resume latest must finish with exactly the weights of an
// uninterrupted run, and the killed save's part must be gone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_paths.h"

namespace {

namespace fs = std::filesystem;
const std::string kClip = std::string(DTRAIN_BINARY_DIR) + "/dtrain-clip";

// 4 epochs of 4 steps; every epoch saves epoch_N.pt and then epoch_latest.pt.
const std::vector<std::string> kTrain = {
    "train", "--train-num-samples", "256", "--batch-size", "64", "--epochs",
    "4",     "--threads",           "1",   "--warmup",     "2",  "--zeroshot-frequency",
    "0",     "--save-most-recent"};

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/clip_checkpoint_kill_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir + "/checkpoints");
  return dir;
}

pid_t Start(const std::string& logs, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {kClip};
  args.insert(args.end(), kTrain.begin(), kTrain.end());
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--logs");
  args.push_back(logs);
  pid_t pid = fork();
  if (pid == 0) {
    int out = ::open((logs + "/output.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(out, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// param_hash of the metrics file's last end line.
std::string FinalHash(const std::string& logs) {
  std::string text = ReadFile(logs + "/metrics/rank-0.jsonl");
  auto at = text.rfind("\"param_hash\":");
  if (at == std::string::npos) return "";
  auto open = text.find('"', at + 13);
  return text.substr(open + 1, text.find('"', open + 1) - open - 1);
}

// Runs training and SIGKILLs it as soon as a temp file for epoch_latest.pt is created while an
// earlier epoch_latest.pt exists. Returns the temp file's name, or "" if the run ended first.
std::string KillDuringSecondLatestSave(const std::string& logs) {
  int watch = inotify_init1(IN_CLOEXEC);
  inotify_add_watch(watch, (logs + "/checkpoints").c_str(), IN_CREATE);
  pid_t pid = Start(logs, {});
  std::string caught;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (caught.empty() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{watch, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) return "";
      continue;
    }
    alignas(inotify_event) char buffer[4096];
    ssize_t n = read(watch, buffer, sizeof buffer);
    for (ssize_t at = 0; at < n;) {
      auto* event = reinterpret_cast<inotify_event*>(buffer + at);
      std::string name = event->len ? event->name : "";
      if (name.rfind("epoch_latest.pt.tmp.", 0) == 0 &&
          fs::exists(logs + "/checkpoints/epoch_latest.pt")) {
        kill(pid, SIGKILL);
        caught = name;
        break;
      }
      at += sizeof(inotify_event) + event->len;
    }
  }
  close(watch);
  if (caught.empty()) kill(pid, SIGKILL);
  Wait(pid);
  return caught;
}

TEST(ClipCheckpointKill, KillDuringSaveLeavesTheLastCheckpointUsable) {
  std::string straight = FreshDir("straight");
  ASSERT_EQ(Wait(Start(straight, {})), 0) << ReadFile(straight + "/output.log");
  std::string expected = FinalHash(straight);
  ASSERT_EQ(expected.size(), 16u);

  // The save is several MB plus an fsync; the kill usually lands inside it. When the rename
  // won the race, try again: the test needs one kill that truly interrupted a save.
  std::string killed, temp;
  for (int attempt = 0; attempt < 3 && temp.empty(); ++attempt) {
    killed = FreshDir("killed");
    std::string name = KillDuringSecondLatestSave(killed);
    ASSERT_FALSE(name.empty()) << "the run ended before its second save\n"
                               << ReadFile(killed + "/output.log");
    if (fs::exists(killed + "/checkpoints/" + name)) temp = name;
  }
  ASSERT_FALSE(temp.empty()) << "no kill landed inside a save in 3 attempts";
  // The half-written temp file is there; the checkpoint it was replacing is intact.
  EXPECT_TRUE(fs::exists(killed + "/checkpoints/epoch_latest.pt"));

  pid_t resume = Start(killed, {"--resume", "latest"});
  ASSERT_EQ(Wait(resume), 0) << ReadFile(killed + "/output.log");
  std::string output = ReadFile(killed + "/output.log");
  EXPECT_NE(output.find("resumed from"), std::string::npos) << output;
  EXPECT_EQ(FinalHash(killed), expected) << output;
  // The killed writer's part is gone (runtime/train/checkpoint_parts.h): a restart killed so
  // would otherwise leave one more checkpoint-sized file each time.
  EXPECT_FALSE(fs::exists(killed + "/checkpoints/" + temp));
  EXPECT_NE(output.find("checkpoints: removed " + killed + "/checkpoints/" + temp +
                        ", the part of a checkpoint whose writer was killed"),
            std::string::npos)
      << output;
}

}  // namespace
