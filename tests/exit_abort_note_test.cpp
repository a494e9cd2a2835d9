// The note for torch's abort at interpreter exit: only for SIGABRT with std::terminate's
// "without an active exception" as the last thing the rank said.
#include <gtest/gtest.h>

#include <csignal>

#include "launcher/exit_abort_note.h"
#include "tests/support/files.h"
#include "tests/support/shell_run.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

ExitStatus Killed(int sig) {
  ExitStatus s;
  s.signal = sig;
  return s;
}

TEST(ExitAbortNote, SaysWhatToCallForTorchsAbortAtExit) {
  const std::string note = ExitAbortNote(
      Killed(SIGABRT), {"rank 0 done", "terminate called without an active exception", ""});
  EXPECT_NE(note.find("dist.destroy_process_group()"), std::string::npos) << note;
  EXPECT_NE(note.find("pytorch/pytorch#190489"), std::string::npos) << note;
  EXPECT_EQ(note.rfind("dtrain: note: ", 0), 0u) << note;
}

TEST(ExitAbortNote, SilentForAnyOtherEnd) {
  const std::vector<std::string> tail = {"terminate called without an active exception"};
  EXPECT_EQ(ExitAbortNote(Killed(SIGSEGV), tail), "");
  ExitStatus exited;
  exited.code = 134;
  EXPECT_EQ(ExitAbortNote(exited, tail), "");
  // An exception that escaped, or output after the message: another story.
  EXPECT_EQ(ExitAbortNote(Killed(SIGABRT), {"terminate called after throwing an instance of 'x'"}),
            "");
  EXPECT_EQ(ExitAbortNote(Killed(SIGABRT),
                          {"terminate called without an active exception", "more output"}),
            "");
  EXPECT_EQ(ExitAbortNote(Killed(SIGABRT), {}), "");
}

// The launch's failure report carries it, after the rank's last lines (a rank that says what
// std::terminate says and aborts, as torch's race leaves one).
TEST(ExitAbortNote, TheFailureReportCarriesIt) {
  testing::TempDir dir("exit-abort-note");
  const testing::ShellRun run = testing::RunShell(
      std::string(DTRAIN_BINARY_DIR) + "/dtrain launch -q -np 1 --log-dir " + dir.path() +
      " --job j -- sh -c 'echo done; echo terminate called without an active exception >&2;"
      " kill -ABRT $$'");
  EXPECT_EQ(run.status.ShellStatus(), 128 + SIGABRT) << run.out;
  EXPECT_NE(run.out.find("failed: killed by SIGABRT\n"), std::string::npos) << run.out;
  const size_t tail = run.out.find("] terminate called without an active exception\n");
  const size_t note = run.out.find("dtrain: note: aborted by std::terminate");
  ASSERT_NE(note, std::string::npos) << run.out;
  EXPECT_LT(tail, note) << run.out;
}

}  // namespace
}  // namespace dtrain
