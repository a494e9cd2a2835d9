// The defects a bad-input run found, one test each (F1..F11 and the smaller items).
// Each fails on the code before the fix: a crash, an "internal error", a silent drop, or time
// and memory out of proportion to the input.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/file_replace.h"
#include "launcher/job_record.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/timeline_summary.h"
#include "launcher/transport.h"
#include "tests/support/cluster_text.h"
#include "tests/support/dtrain_process.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;
using testing::WriteFile;

// Seconds since `since`, in the normal build's terms: the time bounds below are for it, and
// ASan (CI's sanitizer run) makes the same work about three times slower.
double Seconds(std::chrono::steady_clock::time_point since) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr double kSanitizerSlowdown = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr double kSanitizerSlowdown = 4;
#else
  constexpr double kSanitizerSlowdown = 1;
#endif
#else
  constexpr double kSanitizerSlowdown = 1;
#endif
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count() /
         kSanitizerSlowdown;
}

std::string ParseError(const std::string& text) { return testing::ClusterTextError(text); }

// F1: an argument that is not UTF-8 reaches the rank byte for byte; job.json stays readable.
// Reports and records another process may read at any moment (the stall report, job.json) are
// replaced whole: a reader sees the old contents or the new, never an empty or partial file.
TEST(Hardening, FilesOthersReadAreReplacedWhole) {
  TempDir dir;
  const std::string path = dir.path() + "/stall-1.txt";
  const std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  dtrain::ReplaceFile(path, a, "the stall report");
  std::atomic<bool> done{false};
  int partial = 0, reads = 0;
  std::thread reader([&] {
    while (!done) {
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ++reads;
      if (text != a && text != b) ++partial;
    }
  });
  for (int i = 0; i < 200; ++i) dtrain::ReplaceFile(path, i % 2 ? a : b, "the stall report");
  done = true;
  reader.join();
  EXPECT_EQ(partial, 0) << "of " << reads << " reads";
  EXPECT_GT(reads, 0);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A folder that is not there: the error names the file and what it is, nothing is left.
  try {
    dtrain::ReplaceFile(dir.path() + "/gone/job.json", "{}", "the job record");
    ADD_FAILURE() << "no error";
  } catch (const dtrain::Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr(dir.path() + "/gone/job.json.tmp: cannot write the job record"));
  }
}

TEST(Hardening, F1NonUtf8ArgumentRunsAndIsRecorded) {
  TempDir dir;
  auto run = RunDtrain({"launch", "--log-dir", "logs", "--job", "bad", "--", "echo", "caf\xe9"},
                       dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("internal error")));
  EXPECT_EQ(ReadFile(dir.path() + "/logs/bad/rank-0.log"), "caf\xe9\n");
  nlohmann::json record = nlohmann::json::parse(ReadFile(dir.path() + "/logs/bad/job.json"));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(RunDtrain({"logs", "--log-dir", "logs", "--rank", "0"}, dir.path()).out, "caf\xe9\n");
}

// F1: a host name that is not printable ASCII is refused where it is written.
TEST(Hardening, F1HostNameBytesRefusedWithLine) {
  EXPECT_THAT(ParseError("nodes:\n  - host: \"a\\xff\"\n"), HasSubstr("c.yaml:2:"));
}

// F2: aliases repeating a large map: refused at once, without gigabytes.
TEST(Hardening, F2AliasExpansionIsBounded) {
  std::string env = "{";
  for (int i = 0; i < 3000; ++i) env += "K" + std::to_string(i) + ": v,";
  env += "}";
  std::string file = "env: &e " + env + "\nnodes:\n";
  for (int i = 0; i < 3000; ++i) file += "  - {host: h" + std::to_string(i) + ", env: *e}\n";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(ParseError(file), HasSubstr("aliases"));
  EXPECT_LT(Seconds(start), 5.0);
}

// F3: unclosed spans cost linear time in the summary.
TEST(Hardening, F3ManyUnclosedSpansAreLinear) {
  TimelineSummaryBuilder builder;
  const std::string track = "t";
  const std::string name = "ALLREDUCE";
  const nlohmann::json args = {{"bytes", 10}};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200000; ++i) builder.Add(MergedEvent{0, 1, track, 'B', name, i, 0, args});
  builder.Finish({});
  EXPECT_LT(Seconds(start), 3.0);
}

// F4: bad values in a trace: an error naming the file, rank and record, not "internal error".
TEST(Hardening, F4BadTraceValuesNameTheRecord) {
  TempDir dir;
  const std::string trace = dir.path() + "/rank-0.json";
  WriteFile(trace,
            "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3,\"args\":{\"name\":null}},\n"
            "{\"name\":\"A\",\"ph\":\"B\",\"pid\":1,\"ts\":1,\"args\":{\"bytes\":1e400}}]\n");
  try {
    MergeTimelines({trace}, dir.path() + "/m.json",
                   [](const MergedEvent&) {});
    FAIL() << "merged a record with bytes 1e400";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(trace));
    EXPECT_THAT(e.what(), HasSubstr("record 2"));
  }
  WriteFile(trace, "[{\"name\":\"\\ud800\",\"ph\":\"B\",\"pid\":1,\"ts\":1}]\n");
  try {
    MergeTimelines({trace}, dir.path() + "/m.json", [](const MergedEvent&) {});
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(trace));
  }
}

// F5: a rank whose trace is missing or not a file is named in a warning.
TEST(Hardening, F5MissingRankTraceIsWarned) {
  TempDir dir;
  auto run = RunDtrain({"launch", "-np", "2", "--timeline", "--log-dir", "logs", "--job", "t",
                        "--", "sh", "-c",
                        "echo '[{\"name\":\"FORWARD\",\"ph\":\"B\",\"pid\":1,\"ts\":1},"
                        "{\"ph\":\"E\",\"pid\":1,\"ts\":5}]' > \"$DTRAIN_TIMELINE\""},
                       dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string rank1 = dir.path() + "/logs/t/timeline/rank-1.json";
  ASSERT_EQ(::unlink(rank1.c_str()), 0);
  auto merged = RunDtrain({"timeline", "--log-dir", "logs", "--job", "t"}, dir.path());
  EXPECT_EQ(merged.status, 0) << merged.err;
  EXPECT_THAT(merged.err, HasSubstr("rank 1: no trace"));
  ASSERT_EQ(::symlink("/dev/zero", rank1.c_str()), 0);
  merged = RunDtrain({"timeline", "--log-dir", "logs", "--job", "t"}, dir.path(), {}, 20);
  EXPECT_THAT(merged.err, HasSubstr("not a regular file"));
  EXPECT_THAT(merged.err, HasSubstr("rank 1: no trace"));
}

// F7: an env name a shell cannot export is a cluster-file error with its line, before any rank.
TEST(Hardening, F7BadEnvNameIsACheckedError) {
  EXPECT_THAT(ParseError("nodes:\n  - host: a\n    env: {A-B: x}\n"), HasSubstr("c.yaml:3:"));
  EXPECT_THAT(ParseError("env: {1X: y}\nnodes: [{host: a}]\n"), HasSubstr("c.yaml:1:"));
}

// F8: memory of `dtrain logs` does not grow with the log: one 64 MB line, shown with --tail.
TEST(Hardening, F8LogsMemoryIsBounded) {
  TempDir dir;
  auto run = RunDtrain({"launch", "-np", "2", "--log-dir", "logs", "--job", "big", "--quiet",
                        "--", "sh", "-c",
                        "head -c 67108864 /dev/zero | tr '\\0' x; echo; echo done"},
                       dir.path(), {}, 120);
  ASSERT_EQ(run.status, 0) << run.err;
  // ru_maxrss counts what the child had before exec too: CTest runs this test in a process of
  // its own, a few MB. The bound is above what dtrain needs to start at all (`dtrain --version`),
  // which a sanitizer build raises.
  const auto max_rss_kib = [&](const std::vector<std::string>& args) -> long {
    const std::string dtrain = testing::DtrainPath();
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::chdir(dir.path().c_str()) != 0) _exit(99);
      std::vector<char*> argv = {const_cast<char*>(dtrain.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      if (!std::freopen("/dev/null", "w", stdout)) _exit(98);
      ::execv(argv[0], argv.data());
      _exit(97);
    }
    int status = 0;
    struct rusage usage;
    if (::wait4(pid, &status, 0, &usage) != pid || status != 0) return -1;
    return usage.ru_maxrss;
  };
  const long baseline = max_rss_kib({"--version"});
  ASSERT_GT(baseline, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"logs", "--log-dir", "logs"},
        std::vector<std::string>{"logs", "--log-dir", "logs", "--tail", "1"},
        std::vector<std::string>{"logs", "--log-dir", "logs", "--rank", "1"}}) {
    const long used = max_rss_kib(args);
    EXPECT_GT(used, 0) << args.back();
    EXPECT_LT(used, baseline + 32 * 1024)
        << "KiB for " << args.back() << "; --version: " << baseline;
  }
}

// F9: one rank's log comes out byte for byte: no newline the rank never wrote.
TEST(Hardening, F9OneRankIsByteExact) {
  TempDir dir;
  auto run = RunDtrain({"launch", "--log-dir", "logs", "--job", "n", "--", "printf", "a\\nno end"},
                       dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(RunDtrain({"logs", "--log-dir", "logs", "--rank", "0"}, dir.path()).out, "a\nno end");
}

// F10: a rank whose connection dropped after it ran is not "could not start".
TEST(Hardening, F10LostIsNotCouldNotStart) {
  ExitStatus status;
  status.error = "gpu-b: ssh: connection lost: Socket error";
  status.lost = true;
  EXPECT_EQ(status.ShellStatus(), 255);
  EXPECT_THAT(status.Describe(), HasSubstr("lost while running"));
  status.lost = false;
  EXPECT_THAT(status.Describe(), HasSubstr("could not start"));
}

// F11: a NUL in an env value is refused in the cluster file.
TEST(Hardening, F11NulInEnvValueRefused) {
  EXPECT_THAT(ParseError("env: {A: \"x\\0y\"}\nnodes: [{host: a}]\n"), HasSubstr("NUL"));
}

// Smaller items: -c DIR, a sanity limit on ranks, a 32 MB host name.
TEST(Hardening, ClusterFileSmallerItems) {
  TempDir dir;
  try {
    ParseClusterFile(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
  std::string many = "nodes:\n";
  for (int i = 0; i < 20; ++i) many += "  - {host: h" + std::to_string(i) + ", slots: 4096}\n";
  EXPECT_THAT(ParseError(many), HasSubstr("more than 65536 ranks"));
  EXPECT_THAT(ParseError("nodes:\n  - host: " + std::string(1 << 20, 'a') + "\n"),
              HasSubstr("at most 255"));
}

// Nesting deeper than yaml-cpp parses is said as such, with the limit, not as "bad file".
TEST(Hardening, DeepYamlNestingSaysSo) {
  const std::string flow = "nodes: " + std::string(1000, '[') + std::string(1000, ']') + "\n";
  EXPECT_THAT(ParseError(flow), HasSubstr("nested more than"));
  EXPECT_THAT(ParseError(flow), Not(HasSubstr("bad file")));
  std::string block;
  for (int i = 0; i < 1000; ++i) block += std::string(i, ' ') + "a:\n";
  EXPECT_THAT(ParseError(block), HasSubstr("nested more than"));
}

// After a restart the rank log says where the next attempt begins, on a line of its own.
TEST(Hardening, RestartsAreSeparatedInRankLogs) {
  TempDir dir;
  auto run = RunDtrain({"launch", "--log-dir", "logs", "--job", "again", "--max-restarts", "2",
                        "--", "sh", "-c", "printf 'try\\nhalf'; exit 3"},
                       dir.path());
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_EQ(ReadFile(dir.path() + "/logs/again/rank-0.log"),
            "try\nhalf\n--- dtrain: restart 1 of 2 ---\ntry\nhalf\n--- dtrain: restart 2 of 2 ---\n"
            "try\nhalf");
}

// job.json numbers that are floats too large for an integer field read as absent, not as
// whatever an undefined conversion gives.
TEST(Hardening, JobRecordFloatsPastIntegersAreIgnored) {
  TempDir dir;
  WriteFile(dir.path() + "/job.json",
            R"({"job": "j", "status": "failed", "started_us": 1.7e20, "exit_code": 1e30})");
  const JobSummary summary = ReadJobSummary(dir.path());
  EXPECT_EQ(summary.started_us, 0);
  EXPECT_EQ(summary.exit_code, -1);
}

}  // namespace
}  // namespace dtrain
