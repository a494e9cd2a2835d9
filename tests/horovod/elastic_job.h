// What the tests of elastic Horovod under `dtrain launch` share: the real horovod.torch program
// (hvd_elastic_train.py, Horovod 0.28.1 from .venv-horovod), its command line, and how its rank
// logs and the discovery script's host file are read and written.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/support/ssh_cluster.h"

namespace dtrain::test {

inline const std::string kHorovodPython =
    std::string(DTRAIN_SOURCE_DIR) + "/.venv-horovod/bin/python3";
inline const std::string kElasticProgram =
    std::string(DTRAIN_SOURCE_DIR) + "/tests/horovod/hvd_elastic_train.py";

#define REQUIRE_HOROVOD()                                                                    \
  if (!std::filesystem::exists(::dtrain::test::kHorovodPython)) {                            \
    FAIL() << ::dtrain::test::kHorovodPython << " is missing: run scripts/install-deps.sh "  \
           << "--tests (or scripts/install-horovod.sh) to build Horovod into .venv-horovod"; \
  }

inline std::string RankLog(const std::string& job_dir, int rank) {
  return ReadText(fmt::format("{}/rank-{}.log", job_dir, rank));
}

// The file whose existence ends the training of the job ElasticLaunch(..., dir, ...) starts
// (HVD_TEST_STOP_FILE): the ranks end together after the step in which one of them saw it.
inline std::string StopFile(const std::string& dir) {
  return dir + "/stop-training";
}

// Ends that job's training once the test saw what it waited for (see StopFile).
inline void EndTraining(const std::string& dir) {
  std::ofstream(StopFile(dir)) << "stop\n";
}

// The dtrain command line of an elastic job "el" of hvd_elastic_train.py.
inline std::vector<std::string> ElasticLaunch(const std::string& cluster_args,
                                              const std::string& dir,
                                              const std::vector<std::string>& more) {
  std::vector<std::string> args = {"launch", "--job", "el", "--log-dir", dir, "--quiet"};
  args.insert(args.end(), {"-x", "HVD_TEST_STOP_FILE=" + StopFile(dir)});
  std::istringstream words(cluster_args);
  for (std::string w; words >> w;) args.push_back(w);
  args.insert(args.end(), more.begin(), more.end());
  args.insert(args.end(), {"--", kHorovodPython, kElasticProgram});
  return args;
}

// The sizes of the rounds a rank trained in, in order ("3,2,3"); every step of a round must have
// had all its ranks.
inline std::string RoundSizes(const std::string& log) {
  std::smatch m;
  std::string rest = log, sizes;
  const std::regex step("hvd-step step=(\\d+) rank=(\\d+) size=(\\d+) count=(\\d+)");
  std::string last;
  while (std::regex_search(rest, m, step)) {
    EXPECT_EQ(m[3], m[4]) << "every rank of the round took part: " << m[0];
    if (m[3] != last) sizes += (sizes.empty() ? "" : ",") + m[3].str();
    last = m[3];
    rest = m.suffix();
  }
  return sizes;
}

// Expects the ranks whose logs are `logs` to have ended their training together (the same last
// step, at least `min_step`), each with the end line `ends[i]` after its step ("size=3 rank=0
// local=0/1 cross=0/3 same=1": the same parameters as every other rank).
inline void ExpectEndedTogether(const std::vector<std::string>& logs,
                                const std::vector<std::string>& ends, int min_step) {
  const std::regex done("hvd-elastic-done step=(\\d+) (.*)");
  std::string step;
  for (size_t i = 0; i < logs.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(logs[i], m, done)) {
      ADD_FAILURE() << "no end of training in:\n" << logs[i];
      continue;
    }
    EXPECT_EQ(m[2], ends[i]) << logs[i];
    if (step.empty()) step = m[1];
    EXPECT_EQ(m[1], step) << "ended at another step than the first rank: " << logs[i];
    EXPECT_GE(std::stoi(m[1]), min_step) << logs[i];
  }
}

// What the discovery script (`cat FILE`) prints from now on, written whole at once.
inline void ListHosts(const std::string& file, const std::string& hosts) {
  std::ofstream(file + ".new") << hosts;
  std::filesystem::rename(file + ".new", file);
}

}  // namespace dtrain::test
