// The recorded PyTorch profiler traces of tests/fixtures/kineto (two ranks of a DDP job on one
// H100) and what the tests of `dtrain timeline` on them share: reading and writing .json.gz
// traces, running the project's Python (.venv, where HolisticTraceAnalysis is), summarising traces
// as `dtrain timeline --summary` does, and the isolated cases of tests/kineto/hta_cases.py.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/timeline_report.h"
#include "tests/support/gzip_text.h"
#include "tests/support/hta_answers.h"
#include "tests/support/popen_shell.h"
#include "tests/support/test_paths.h"

namespace dtrain::test {

namespace fs = std::filesystem;

inline const std::string kFixtures = std::string(DTRAIN_SOURCE_DIR) + "/tests/fixtures/kineto";
inline const std::string kPython = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/python3";
inline const std::string kRank0 = kFixtures + "/ddp-2ranks-gloo-rank0.json.gz";
inline const std::string kRank1 = kFixtures + "/ddp-2ranks-gloo-rank1.json.gz";

// `text` with the first `from` replaced by `to`; a failure when there is none.
inline std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Writes the recorded trace `source` gzipped to `out` with its launches by the driver
// (cuLaunchKernelEx, which HTA 0.5 does not count) renamed to a runtime call HTA counts
// (cudaLaunchKernelExC): the trace on which dtrain and HTA must agree figure for figure. The
// number of launches renamed.
inline size_t WriteWithDriverLaunchesRenamed(const std::string& source, const std::string& out) {
  std::string text = Gunzip(source);
  size_t renames = 0;
  for (size_t at = 0; (at = text.find("\"cuLaunchKernelEx\"", at)) != std::string::npos;
       ++renames) {
    text.replace(at, 18, "\"cudaLaunchKernelExC\"");
  }
  Gzip(out, text);
  return renames;
}

// What tests/kineto/`script` prints, run with `args` under the project's Python with the
// environment `env` ("NAME=value ...", or ""), stdout and stderr together; its exit status in
// *status. An answer HTA gave before to the same question is read back instead (hta_answers.h).
inline std::string RunHta(const std::string& env, const std::string& script,
                          const std::string& args, int* status) {
  const HtaAnswers answers(DTRAIN_SOURCE_DIR, env, script, args);
  if (std::optional<std::string> kept = answers.Kept()) {
    *status = 0;
    return *kept;
  }
  const std::string out = RunShell(
      env + " " + kPython + " " + DTRAIN_SOURCE_DIR + "/tests/kineto/" + script + " " + args,
      status);
  if (*status == 0) answers.Keep(out);
  return out;
}

// Runs tests/kineto/`script` with `args` under the project's Python at nanosecond precision
// (HTA_DISABLE_NS_ROUNDING=1) and parses the JSON document it prints last; a failure, and an
// empty object, when it fails.
inline nlohmann::json RunHtaScript(const std::string& script, const std::string& args) {
  int status = 0;
  const std::string out = RunHta("HTA_DISABLE_NS_ROUNDING=1", script, args, &status);
  EXPECT_EQ(status, 0) << out;
  const size_t at = out.rfind("\n{");
  nlohmann::json doc = nlohmann::json::parse(
      out.substr(at == std::string::npos ? std::min(out.find('{'), out.size()) : at + 1), nullptr,
      false);
  EXPECT_TRUE(doc.is_object()) << out;
  return doc.is_object() ? doc : nlohmann::json::object();
}

inline void RequireFixtures() {
  // The fixtures are part of the repository: missing ones are a failure.
  ASSERT_TRUE(fs::exists(kRank0) && fs::exists(kRank1)) << "missing " << kFixtures;
}

// `dtrain timeline --summary` of `inputs`, the merged trace written to `output`.
inline TimelineReport Summarize(const std::vector<std::string>& inputs, const std::string& output) {
  TimelineRequest request;
  request.inputs = inputs;
  request.output = output;
  request.summary = true;
  return MakeTimeline(request);
}

// tests/kineto/hta_cases.py's traces cut from `source` (the recorded rank 0), one folder per case
// under `out`; the cases' names.
inline std::vector<std::string> MakeCases(const std::string& out,
                                          const std::string& source = kRank0) {
  int status = 0;
  const std::string made = RunShell(
      kPython + " " + DTRAIN_SOURCE_DIR + "/tests/kineto/hta_cases.py " + source + " " + out,
      &status);
  EXPECT_EQ(status, 0) << made;
  std::vector<std::string> cases;
  for (size_t at = 0, end; status == 0 && (end = made.find('\n', at)) != std::string::npos;
       at = end + 1) {
    cases.push_back(made.substr(at, end - at));
  }
  return cases;
}

// The recorded ranks' folder, then `dir`/cases/<case>: each isolated case of
// tests/kineto/hta_cases.py cut from the recorded rank 0.
inline std::vector<fs::path> FixturesAndCases(const fs::path& dir) {
  std::vector<fs::path> folders{kFixtures};
  for (const std::string& name : MakeCases((dir / "cases").string())) {
    folders.push_back(dir / "cases" / name);
  }
  return folders;
}

// `dtrain timeline --summary` of every .json.gz trace in `folder` (by name), the merged trace
// written to `output`.
inline TimelineReport SummarizeFolder(const fs::path& folder, const fs::path& output) {
  std::vector<std::string> inputs;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string path = entry.path().string();
    if (path.size() > 8 && path.compare(path.size() - 8, 8, ".json.gz") == 0) {
      inputs.push_back(path);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  return Summarize(inputs, output.string());
}

// The folders the comparisons with HTA run on: `dir`/renamed, the recorded ranks with their
// driver launches renamed (WriteWithDriverLaunchesRenamed), first; then `dir`/cases/<case>, each
// isolated case of tests/kineto/hta_cases.py cut from that rank 0.
inline std::vector<fs::path> RenamedFixtureAndCases(const fs::path& dir) {
  const fs::path renamed = dir / "renamed";
  fs::create_directories(renamed);
  WriteWithDriverLaunchesRenamed(kRank0, (renamed / "rank0.json.gz").string());
  WriteWithDriverLaunchesRenamed(kRank1, (renamed / "rank1.json.gz").string());
  std::vector<fs::path> folders{renamed};
  for (const std::string& name :
       MakeCases((dir / "cases").string(), (renamed / "rank0.json.gz").string())) {
    folders.push_back(dir / "cases" / name);
  }
  return folders;
}

}  // namespace dtrain::test
