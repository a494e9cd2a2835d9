// Subprocess, the one way dtrain starts a process: exit codes and signals, the environment
// (overrides and removals), the working directory, the pre-exec hook, pipes and files, and no
// other descriptor of dtrain's.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/subprocess.h"
#include "tests/support/files.h"
#include "tests/support/shell_run.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::ReadToEnd;
using testing::TempDir;

SubprocessOptions Shell(const std::string& script) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", script};
  return options;
}

// Starts `options`, reads stdout to its end and reaps: the output and how it ended.
std::pair<std::string, ExitStatus> RunToEnd(const SubprocessOptions& options) {
  Subprocess child;
  EXPECT_EQ(child.Start(options), "");
  std::string out = ReadToEnd(child.out_fd);
  return {out, child.Finish()};
}

TEST(Subprocess, ExitCodesAndSignals) {
  EXPECT_TRUE(RunToEnd(Shell("exit 0")).second.ok());
  EXPECT_EQ(RunToEnd(Shell("exit 7")).second.code, 7);
  const ExitStatus killed = RunToEnd(Shell("kill -TERM $$")).second;
  EXPECT_EQ(killed.signal, SIGTERM);
  EXPECT_EQ(killed.ShellStatus(), 128 + SIGTERM);
  EXPECT_EQ(killed.Describe(), "killed by SIGTERM");
}

// A descriptor dtrain holds open without close-on-exec (as libssh holds its sockets) does not
// reach the program; the streams it was given do.
TEST(Subprocess, OnlyItsOwnStreamsReachTheProgram) {
  const int held = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(held, 3);
  const std::string fd = std::to_string(held);
  SubprocessOptions options =
      Shell("for f in 1 2 " + fd + "; do [ -e /proc/self/fd/$f ] && echo \"$f open\" || "
            "echo \"$f closed\"; done");
  EXPECT_EQ(RunToEnd(options).first, "1 open\n2 open\n" + fd + " closed\n");
  ::close(held);
}

TEST(Subprocess, EnvironmentOverridesAndRemovals) {
  ::setenv("DTRAIN_SUBPROCESS_KEEP", "kept", 1);
  ::setenv("DTRAIN_SUBPROCESS_GONE", "here", 1);
  SubprocessOptions options = Shell(
      "echo \"$DTRAIN_SUBPROCESS_KEEP|$DTRAIN_SUBPROCESS_NEW|${DTRAIN_SUBPROCESS_GONE-unset}\"");
  options.env["DTRAIN_SUBPROCESS_NEW"] = "it's \"$HOME\"";
  options.env["DTRAIN_SUBPROCESS_GONE"] = std::nullopt;
  EXPECT_EQ(RunToEnd(options).first, "kept|it's \"$HOME\"|unset\n");
  ::unsetenv("DTRAIN_SUBPROCESS_KEEP");
  ::unsetenv("DTRAIN_SUBPROCESS_GONE");

  const std::vector<std::string> merged = MergeEnvironment({{"A_B", "1"}, {"PATH", std::nullopt}});
  EXPECT_EQ(EnvironmentValue(merged, "A_B"), "1");
  EXPECT_EQ(EnvironmentValue(merged, "PATH"), "");
  EXPECT_EQ(EnvironmentValue({"AB=2", "A=1"}, "A"), "1");
}

TEST(Subprocess, WorkingDirectoryAndWhyItCouldNotStart) {
  TempDir dir;
  SubprocessOptions options = Shell("pwd");
  options.cwd = dir.path();
  EXPECT_EQ(RunToEnd(options).first, dir.path() + "\n");

  Subprocess child;
  options.cwd = dir.path() + "/missing";
  EXPECT_THAT(child.Start(options), HasSubstr("cannot enter " + dir.path() + "/missing"));
  EXPECT_EQ(child.pid(), -1);
  SubprocessOptions missing;
  missing.argv = {"no-such-program-for-subprocess"};
  EXPECT_THAT(child.Start(missing), HasSubstr("cannot run no-such-program-for-subprocess"));
  missing.program = dir.path();  // a directory: exec fails in the child
  EXPECT_THAT(child.Start(missing), HasSubstr("cannot run " + dir.path()));
  EXPECT_EQ(FindOnPath("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(FindOnPath("sh", "/nonexistent"), "");
}

TEST(Subprocess, PreExecHookRunsInTheChildInItsOwnGroup) {
  SubprocessOptions options = Shell("echo \"$DTRAIN_FROM_HOOK\"; ps -o pgid= -p $$");
  options.pre_exec = [] { ::setenv("DTRAIN_FROM_HOOK", "hooked", 1); };
  Subprocess child;
  ASSERT_EQ(child.Start(options), "");
  const std::string out = ReadToEnd(child.out_fd);
  EXPECT_TRUE(child.Finish().ok());
  // execve gets the environment prepared before fork: the hook's setenv does not reach it.
  EXPECT_EQ(out.substr(0, out.find('\n')), "");
  EXPECT_EQ(std::atoi(out.substr(out.find('\n') + 1).c_str()), child.pid());
  EXPECT_EQ(std::getenv("DTRAIN_FROM_HOOK"), nullptr);

  SubprocessOptions marker = Shell("true");
  TempDir dir;
  const std::string path = dir.path() + "/hook-ran";
  marker.pre_exec = [&path] { ::close(::open(path.c_str(), O_WRONLY | O_CREAT, 0644)); };
  EXPECT_TRUE(RunToEnd(marker).second.ok());
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
}

TEST(Subprocess, PipesFilesAndStdin) {
  SubprocessOptions options = Shell("cat; echo err >&2");
  options.in = Stdio::kPipe;
  Subprocess child;
  ASSERT_EQ(child.Start(options), "");
  ASSERT_GE(child.in_fd, 0);
  ASSERT_EQ(::write(child.in_fd, "abc", 3), 3);
  Subprocess::Close(child.in_fd);
  const std::string out = ReadToEnd(child.out_fd);
  const std::string err = ReadToEnd(child.err_fd);
  EXPECT_TRUE(child.Finish().ok());
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(err, "err\n");

  TempDir dir;
  SubprocessOptions to_files = Shell("echo out; echo err >&2");
  to_files.out = to_files.err = Stdio::kFile;
  to_files.out_file = dir.path() + "/out";
  to_files.err_file = dir.path() + "/err";
  EXPECT_TRUE(RunToEnd(to_files).second.ok());
  EXPECT_EQ(ReadFile(dir.path() + "/out"), "out\n");
  EXPECT_EQ(ReadFile(dir.path() + "/err"), "err\n");
}

TEST(Subprocess, DoneWithoutWaitingAndKilledWithItsGroupWhenDropped) {
  Subprocess child;
  SubprocessOptions options = Shell("sleep 30 & sleep 30; wait");
  options.out = options.err = Stdio::kNull;
  ASSERT_EQ(child.Start(options), "");
  EXPECT_FALSE(child.Done());
  const pid_t group = child.pid();
  child = Subprocess();  // the old child's whole group is killed and the child reaped
  bool gone = false;     // the background sleep, a zombie for a moment, is reaped by init
  for (int i = 0; i < 200 && !gone; ++i, ::usleep(10000)) gone = ::kill(-group, 0) != 0;
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace dtrain
