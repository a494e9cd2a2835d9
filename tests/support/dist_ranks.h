// Starts N real processes of a worker binary as the ranks of one job on this machine (Gloo over
// loopback), each with its own environment and log file; Wait() kills them all after a deadline.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/free_port.h"

namespace dtrain::clip::testing {

using dtrain::test::FreePort;

struct RankProcesses {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;

  // Starts `ranks` (a subset of 0..world-1, to simulate absent ranks) of `binary args...`.
  // `rank_env`: more NAME=VALUE for every rank, "{rank}" in a value replaced by the rank.
  void Start(const std::string& binary, const std::vector<std::string>& args, int world,
             int local_world, const std::vector<int>& ranks, const std::string& log_dir,
             const std::map<std::string, std::string>& rank_env = {}) {
    int port = FreePort();
    for (int rank : ranks) {
      std::map<std::string, std::string> env = {{"RANK", std::to_string(rank)},
                                                {"WORLD_SIZE", std::to_string(world)},
                                                {"LOCAL_RANK", std::to_string(rank % local_world)},
                                                {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", std::to_string(port)},
                                                {"OMP_NUM_THREADS", "1"}};
      for (const auto& [name, value] : rank_env) {
        std::string v = value;
        for (size_t at; (at = v.find("{rank}")) != std::string::npos;)
          v.replace(at, 6, std::to_string(rank));
        env[name] = v;
      }
      std::string log = log_dir + "/rank-" + std::to_string(rank) + ".log";
      logs.push_back(log);
      pid_t pid = fork();
      if (pid == 0) {
        for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
        FILE* out = std::fopen(log.c_str(), "w");
        dup2(fileno(out), 1);
        dup2(fileno(out), 2);
        std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
        for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(binary.c_str(), argv.data());
        _exit(127);
      }
      pids.push_back(pid);
    }
  }

  // Exit statuses in start order (-signal when killed); kills what still runs after `limit`.
  std::vector<int> Wait(std::chrono::seconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<int> codes(pids.size(), -1000);
    size_t left = pids.size();
    while (left > 0) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (codes[i] != -1000) continue;
        int status = 0;
        if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
          codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
          --left;
        }
      }
      if (left > 0 && std::chrono::steady_clock::now() > deadline) {
        for (size_t i = 0; i < pids.size(); ++i) {
          if (codes[i] == -1000) kill(pids[i], SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return codes;
  }

  std::string Log(size_t i) const {
    std::ifstream in(logs.at(i));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

}  // namespace dtrain::clip::testing
