// Quoting and the remote wrapper, run here through /bin/sh exactly as a node's sshd would run
// them: values survive byte for byte, signal lines reach the process group, EOF ends the job.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "launcher/horovod_gloo.h"
#include "launcher/shell_quote.h"
#include "launcher/ssh/remote_command.h"
#include "launcher/subprocess.h"

namespace dtrain {
namespace {

const std::vector<std::string> kNasty = {"",
                                         "plain",
                                         "two words",
                                         "it's",
                                         "\"double\"",
                                         "$(touch /tmp/dtrain-pwned)",
                                         "`touch /tmp/dtrain-pwned`",
                                         "a;touch /tmp/dtrain-pwned",
                                         "line1\nline2\n",
                                         "\\",
                                         "'''",
                                         "$HOME ${PATH:-x} * ? ~ & | < > ! #",
                                         "tab\there",
                                         "-n",
                                         "--"};

// A shell command run with a pipe on stdin; once it is quiet for 300 ms, then_send is written
// and (close_stdin) stdin closed, as a launcher would.
struct ShellRun {
  std::string output;
  int status = -1;  // the shell's status: exit code, 128+N for a signal
};

ShellRun RunShell(const std::string& command, const std::string& input,
                  const std::string& then_send = "", bool close_stdin = true) {
  SubprocessOptions options;
  options.argv = {"/bin/sh", "-c", "exec 2>&1; " + command};  // the shell's stderr joins too
  options.in = Stdio::kPipe;
  options.err = Stdio::kNull;
  Subprocess child;
  EXPECT_EQ(child.Start(options), "");
  signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(write(child.in_fd, input.data(), input.size()), static_cast<ssize_t>(input.size()));
  ShellRun run;
  char buffer[4096];
  bool sent = false;
  while (child.out_fd >= 0) {
    pollfd p{child.out_fd, POLLIN, 0};
    if (poll(&p, 1, 300) == 0 && !sent) {  // quiet for a moment: the process is running
      if (!then_send.empty()) {
        EXPECT_EQ(write(child.in_fd, then_send.data(), then_send.size()),
                  static_cast<ssize_t>(then_send.size()));
      }
      sent = true;
      if (close_stdin) Subprocess::Close(child.in_fd);
      continue;
    }
    run.output.append(buffer, Subprocess::Read(child.out_fd, buffer, sizeof buffer));
  }
  run.status = child.Finish().ShellStatus();
  return run;
}

TEST(ShellQuote, EveryValueReadsBackUnchanged) {
  for (const std::string& value : kNasty) {
    const ShellRun run = RunShell("printf %s " + ShellQuote(value), "", "");
    EXPECT_EQ(run.output, value);
  }
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellJoin({"a b", ""}), "'a b' ''");
  EXPECT_NE(access("/tmp/dtrain-pwned", F_OK), 0);
}

TEST(ShellQuote, VariableNames) {
  EXPECT_TRUE(IsShellVariableName("NCCL_DEBUG"));
  EXPECT_TRUE(IsShellVariableName("_x1"));
  EXPECT_FALSE(IsShellVariableName("1X"));
  EXPECT_FALSE(IsShellVariableName("A-B"));
  EXPECT_FALSE(IsShellVariableName("A=B"));
  EXPECT_FALSE(IsShellVariableName(""));
}

ProcessSpec Proc(std::vector<std::string> argv) {
  ProcessSpec p;
  p.argv = std::move(argv);
  return p;
}

TEST(RemoteCommand, EnvArgvAndStdinArriveByteForByte) {
  for (const std::string& value : kNasty) {
    ProcessSpec p = Proc({"sh", "-c", "printf '%s|%s|' \"$V\" \"$1\"; cat", "arg0", value});
    p.env = {{"V", value}};
    p.stdin_data = value;
    const ShellRun run = RunShell(BuildRemoteCommand(p, {}), p.stdin_data, "");
    EXPECT_EQ(run.output, value + "|" + value + "|" + value);
    EXPECT_EQ(run.status, 0);
  }
  EXPECT_NE(access("/tmp/dtrain-pwned", F_OK), 0);
}

TEST(RemoteCommand, PythonPathHeadGoesFirstAndCwdApplies) {
  ProcessSpec p = Proc({"sh", "-c", "echo \"$PYTHONPATH\" \"$(pwd)\""});
  p.python_path_head = "/work dir";
  RemoteCommandOptions options;
  options.cwd = "/tmp";
  EXPECT_EQ(RunShell("unset PYTHONPATH; " + BuildRemoteCommand(p, options), "", "").output,
            "/work dir /tmp\n");
  EXPECT_EQ(
      RunShell("export PYTHONPATH='/a b:/c'; " + BuildRemoteCommand(p, options), "", "").output,
      "/work dir:/a b:/c /tmp\n");
  options.cwd = "/no/such/dir";
  const ShellRun missing = RunShell(BuildRemoteCommand(p, options), "", "");
  EXPECT_EQ(missing.status, 126);
  EXPECT_NE(missing.output.find("cannot change directory to /no/such/dir"), std::string::npos);
  options.cwd_required = false;
  EXPECT_EQ(RunShell(BuildRemoteCommand(p, options), "", "").status, 0);
}

// A Horovod rank on an SSH node of a job without --horovod finds its Gloo interface as it
// starts: the route towards the address dtrain passed; a value already set stays; the carrier
// variable never reaches the program.
TEST(RemoteCommand, GlooInterfaceIsTheRouteTowardsThePeer) {
  ProcessSpec p = Proc({"sh", "-c", "echo \"${HOROVOD_GLOO_IFACE-unset} ${" +
                                        std::string(kGlooIfaceTowards) + "-gone}\""});
  p.env = {{kGlooIfaceTowards, "127.0.0.1"}};
  EXPECT_EQ(RunShell(BuildRemoteCommand(p, {}), "", "").output, "lo gone\n");
  p.env.emplace("HOROVOD_GLOO_IFACE", "ib0");
  EXPECT_EQ(RunShell(BuildRemoteCommand(p, {}), "", "").output, "ib0 gone\n");
  p.env = {{"OTHER", "1"}};  // not asked: nothing set
  EXPECT_EQ(RunShell(BuildRemoteCommand(p, {}), "", "").output, "unset gone\n");
}

TEST(RemoteCommand, ExitCodesAndMissingCommands) {
  EXPECT_EQ(RunShell(BuildRemoteCommand(Proc({"sh", "-c", "exit 7"}), {}), "", "").status, 7);
  const ShellRun missing = RunShell(BuildRemoteCommand(Proc({"no-such-command-here"}), {}), "", "");
  EXPECT_EQ(missing.status, 127);
  EXPECT_NE(missing.output.find("no-such-command-here"), std::string::npos);
}

// A daemon that left the process's session and replaced its environment (setsid env -i), with a
// child in its session, is handed to the wrapper (its subreaper) when the process ends, and ends
// with it; the wrapper does not wait for it.
TEST(RemoteCommand, ADaemonWithAnEnvironmentOfItsOwnEndsWithTheProcess) {
  if (access("/usr/bin/perl", X_OK) != 0 && access("/usr/bin/python3", X_OK) != 0) {
    GTEST_SKIP() << "neither perl nor python3 in /usr/bin: the wrapper cannot be a subreaper";
  }
  const auto start = std::chrono::steady_clock::now();
  // The process waits until the daemon has replaced its environment (before, it still carries
  // the process's tag, which would name it too). No cgroup, which would find it as well where this
  // machine lets the wrapper make one. Should the daemon be missed, its shell holds the output
  // open for 12 s and `sleep 4141` none.
  ProcessSpec p = Proc({"sh", "-c",
                        "setsid env -i sh -c 'sleep 4141 >/dev/null 2>&1 & sleep 12' & d=$!; "
                        "sleep 0.5; echo $d"});
  p.env = {{"DTRAIN_RANK_CGROUP", "0"}};
  const ShellRun run = RunShell(BuildRemoteCommand(p, {}), "", "", /*close_stdin=*/false);
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8))
      << "the wrapper waited for the daemon";
  const int daemon = std::atoi(run.output.c_str());
  ASSERT_GT(daemon, 0) << run.output;
  std::ifstream stat("/proc/" + std::to_string(daemon) + "/stat");
  std::string line;
  std::getline(stat, line);
  EXPECT_TRUE(line.empty() || line.find(") Z ") != std::string::npos) << "still runs: " << line;
  EXPECT_EQ(RunShell("pgrep -x -f 'sleep 4141' || exit 0; pkill -x -f 'sleep 4141'", "", "").output,
            "")
      << "its child still runs";
}

TEST(RemoteCommand, OnlyARanksWrapperAdoptsItsOrphansAndEitherEndsItsSession) {
  if (access("/usr/bin/perl", X_OK) != 0 && access("/usr/bin/python3", X_OK) != 0) {
    GTEST_SKIP() << "neither perl nor python3 in /usr/bin: the wrapper cannot be a subreaper";
  }
  // The process orphans a `sleep` (its shell has been waited for, so it was handed on) and prints
  // the wrapper's pid (its parent), then the orphan's pid and its parent now.
  for (const bool own : {false, true}) {
    ProcessSpec p = Proc({"sh", "-c",
                          "o=$(sh -c 'sleep 4243 </dev/null >/dev/null 2>&1 & echo $!'); "
                          "echo \"$PPID $o $(awk '/^PPid:/ { print $2 }' /proc/$o/status)\""});
    p.own_step = own;
    const ShellRun run = RunShell(BuildRemoteCommand(p, {}), "", "", /*close_stdin=*/false);
    ASSERT_EQ(run.status, 0) << run.output;
    int wrapper = 0, orphan = 0, parent = 0;
    ASSERT_EQ(std::sscanf(run.output.c_str(), "%d %d %d", &wrapper, &orphan, &parent), 3)
        << run.output;
    if (own) {
      EXPECT_NE(parent, wrapper) << "a step of dtrain's own adopted its orphan";
    } else {
      EXPECT_EQ(parent, wrapper) << "the rank's wrapper is not the subreaper";
    }
    std::ifstream stat("/proc/" + std::to_string(orphan) + "/stat");
    std::string line;
    std::getline(stat, line);
    EXPECT_TRUE(line.empty() || line.find("sleep") == std::string::npos ||
                line.find(") Z ") != std::string::npos)
        << (own ? "own step" : "rank") << ": the orphan outlived its session: " << line;
  }
  RunShell("pkill -x -f 'sleep 4243'; exit 0", "", "");
}

TEST(RemoteCommand, SignalLinesReachTheWholeProcessGroup) {
  // The child `sleep` shares the group: both end, so the wait returns at once.
  const std::string command =
      BuildRemoteCommand(Proc({"sh", "-c", "sleep 30 & echo up; wait"}), {});
  const auto start = std::chrono::steady_clock::now();
  const ShellRun run = RunShell(command, "", RemoteSignalLine(SIGTERM), false);
  EXPECT_EQ(run.output, "up\n");
  EXPECT_EQ(run.status, 128 + SIGTERM);
  EXPECT_EQ(ExitStatus::FromShellStatus(run.status).signal, SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(RemoteCommand, EndOfInputTerminatesTheJob) {
  const auto start = std::chrono::steady_clock::now();
  // Nothing sent, stdin closed: like a dropped connection.
  const ShellRun run =
      RunShell(BuildRemoteCommand(Proc({"sh", "-c", "echo up; sleep 30"}), {}), "", "", true);
  EXPECT_EQ(run.output, "up\n");
  EXPECT_EQ(run.status, 128 + SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(RemoteCommand, ADaemonThatLeftTheRankIsAskedToEndBeforeItIsKilledWhenTheJobIsEnded) {
  if (access("/usr/bin/perl", X_OK) != 0 && access("/usr/bin/python3", X_OK) != 0) {
    GTEST_SKIP() << "neither perl nor python3 in /usr/bin: the wrapper cannot be a subreaper";
  }
  char dir_template[] = "/tmp/dtrain-daemon-term-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string mark = std::string(dir_template) + "/term";
  // The daemon leaves the rank's session and replaces its environment (no tag, no cgroup: only
  // the subreaper finds it once the rank is gone); on SIGTERM it writes the mark and exits.
  ProcessSpec p = Proc({"sh", "-c",
                        "setsid env -i sh -c 'trap \"echo term >$0; exit 0\" TERM; "
                        "while :; do sleep 0.1; done' " +
                            mark + " </dev/null >/dev/null 2>&1 & echo up; sleep 30"});
  p.env = {{"DTRAIN_RANK_CGROUP", "0"}};
  // Stdin closes once the rank is quiet: the connection dropped, the job is being ended.
  const ShellRun run = RunShell(BuildRemoteCommand(p, {}), "", "", /*close_stdin=*/true);
  EXPECT_EQ(run.output, "up\n");
  EXPECT_EQ(run.status, 128 + SIGTERM);
  std::ifstream got(mark);
  std::string line;
  std::getline(got, line);
  EXPECT_EQ(line, "term") << "the daemon was not sent SIGTERM before the wrapper ended";
  // "ter[m]": the pattern matches the daemon's command line, not this shell's.
  const std::string pattern = std::string(dir_template) + "/ter[m]";
  EXPECT_EQ(
      RunShell("pgrep -f '" + pattern + "' || exit 0; pkill -f '" + pattern + "'", "", "").output,
      "")
      << "the daemon still runs";
  RunShell("rm -rf '" + std::string(dir_template) + "'", "", "");
}

TEST(RemoteCommand, DeadManSwitchEndsTheGroupWhenDtrainFallsSilent) {
  // stdin stays open and nothing arrives: a cut network, where no EOF ever comes.
  RemoteCommandOptions options;
  options.node_timeout_s = 2;
  options.grace_s = 1;
  const auto start = std::chrono::steady_clock::now();
  const ShellRun run = RunShell(
      BuildRemoteCommand(Proc({"sh", "-c", "sleep 12 & echo up; wait"}), options), "", "", false);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.output, "up\n");
  EXPECT_EQ(run.status, 128 + SIGTERM);
  EXPECT_GE(took, 2.0);
  EXPECT_LT(took, 2 + 1 + 1 + 1.5);  // node timeout, a sample's second, grace, slack
}

TEST(RemoteCommand, HeartbeatLinesKeepTheDeadManSwitchQuiet) {
  RemoteCommandOptions options;
  options.node_timeout_s = 2;
  SubprocessOptions run;
  run.argv = {"/bin/sh", "-c",
              BuildRemoteCommand(Proc({"sh", "-c", "sleep 5; echo done"}), options)};
  run.in = Stdio::kPipe;
  run.err = Stdio::kNull;
  Subprocess child;
  ASSERT_EQ(child.Start(run), "");
  signal(SIGPIPE, SIG_IGN);
  std::string output;
  char buffer[256];
  while (child.out_fd >= 0) {
    pollfd p{child.out_fd, POLLIN, 0};
    if (poll(&p, 1, 500) == 0) {
      const ssize_t n = write(child.in_fd, kHeartbeatLine.data(), kHeartbeatLine.size());
      EXPECT_EQ(n, static_cast<ssize_t>(kHeartbeatLine.size()));
      continue;
    }
    output.append(buffer, Subprocess::Read(child.out_fd, buffer, sizeof buffer));
  }
  EXPECT_EQ(output, "done\n");
  EXPECT_EQ(child.Finish().code, 0);
}

TEST(RemoteCommand, RefusesNamesAndValuesNoShellCanCarry) {
  ProcessSpec p = Proc({"true"});
  p.env = {{"BAD-NAME", "x"}};
  EXPECT_THROW(BuildRemoteCommand(p, {}), std::exception);
  p.env = {{"V", std::string("a\0b", 3)}};
  EXPECT_THROW(BuildRemoteCommand(p, {}), std::exception);
  EXPECT_EQ(RemoteSignalLine(SIGKILL), "KILL\n");
}

}  // namespace
}  // namespace dtrain
