// The local transport driven directly, as the supervisor and the doctor drive it: real child
// processes, their output in the order written, stdin, exit statuses, and executable lookup.
#include <signal.h>
#include <unistd.h>

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/local/local_transport.h"
#include "tests/support/files.h"
#include "tests/support/process_state.h"
#include "tests/support/test_paths.h"
#include "tests/support/transport_recorder.h"

namespace dtrain {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

using Recorder = testing::TransportRecorder;

ProcessSpec Shell(int id, const std::string& script) {
  ProcessSpec spec;
  spec.id = id;
  spec.argv = {"sh", "-c", script};
  return spec;
}

// True once `pid` is gone or a zombie (within 5 s).
bool Gone(int pid) {
  for (int i = 0; i < 500; ++i) {
    const char state = testing::ProcessState(pid);
    if (state == 0 || state == 'Z') return true;
    ::usleep(10000);
  }
  return false;
}

void RunToEnd(LocalTransport& transport, Recorder& recorder) {
  EXPECT_TRUE(recorder.RunToEnd(transport, 20));
}

TEST(LocalTransport, OutputInOrderStdinAndStatuses) {
  LocalTransport transport("");
  Recorder rec;
  ProcessSpec cat = Shell(3, "cat; echo done >&2");
  cat.stdin_data = std::string(200000, 'x');  // more than a pipe holds at once
  std::vector<ProcessSpec> procs = {
      Shell(0, "echo out1; echo err1 >&2; echo out2; exit 4"),
      Shell(1, "kill -TERM $$"),
      Shell(2, "printf 'no newline'"),
      cat,
  };
  procs.push_back(Shell(4, "echo \"$GREETING\"; echo \"$PYTHONPATH\""));
  procs.back().env["GREETING"] = "it's \"$HOME\"";
  procs.back().python_path_head = "/head";
  transport.Start(procs, rec);
  RunToEnd(transport, rec);
  // Each stream in order; stderr apart, so dtrain can show it on its own stderr.
  EXPECT_EQ(rec.errors[0], "err1\n");
  EXPECT_THAT(rec.output[0],
              AnyOf("out1\nerr1\nout2\n", "out1\nout2\nerr1\n", "err1\nout1\nout2\n"));
  EXPECT_EQ(rec.exits[0].code, 4);
  EXPECT_EQ(rec.exits[0].Describe(), "exit 4");
  EXPECT_EQ(rec.exits[1].signal, SIGTERM);
  EXPECT_EQ(rec.exits[1].ShellStatus(), 128 + SIGTERM);
  EXPECT_EQ(rec.exits[1].Describe(), "killed by SIGTERM");
  EXPECT_EQ(rec.output[2], "no newline");
  EXPECT_TRUE(rec.exits[2].ok());
  EXPECT_EQ(rec.output[3], std::string(200000, 'x') + "done\n");
  EXPECT_EQ(rec.errors[3], "done\n");
  const char* old = std::getenv("PYTHONPATH");
  EXPECT_EQ(rec.output[4], std::string("it's \"$HOME\"\n/head") +
                               (old && *old ? std::string(":") + old : "") + "\n");
}

TEST(LocalTransport, SignalAllReachesChildrenOfRanks) {
  LocalTransport transport("/");
  Recorder rec;
  transport.Start({Shell(0, "trap 'echo term' TERM; sleep 1000 & echo $!; wait; echo after"),
                   Shell(1, "pwd; sleep 1000")},
                  rec);
  while (rec.output[0].find('\n') == std::string::npos || rec.output[1].empty()) {
    ASSERT_TRUE(transport.Poll(100, rec));
  }
  const int grandchild = std::stoi(rec.output[0]);
  EXPECT_EQ(rec.output[1], "/\n");  // the default working directory
  // Until the background child has exec'd sleep it is a copy of the shell with the shell's trap,
  // which would swallow the signal: wait for `sleep` (a race the shell has, not the transport).
  for (int i = 0;
       i < 500 && testing::ReadFile("/proc/" + std::to_string(grandchild) + "/comm") != "sleep\n";
       ++i) {
    transport.Poll(10, rec);
  }
  transport.SignalAll(SIGTERM);  // the shell traps it; its background sleep gets it too
  RunToEnd(transport, rec);
  EXPECT_EQ(rec.exits[1].signal, SIGTERM);
  EXPECT_TRUE(rec.exits[0].ok());
  EXPECT_THAT(rec.output[0], HasSubstr("term\nafter\n"));
  EXPECT_TRUE(Gone(grandchild));
}

TEST(LocalTransport, UnknownCommandIsAnExitNotAThrow) {
  LocalTransport transport("");
  Recorder rec;
  ProcessSpec spec;
  spec.argv = {"surely-not-a-command"};
  transport.Start({spec}, rec);
  EXPECT_FALSE(transport.Poll(10, rec));
  EXPECT_THAT(rec.exits[0].error, HasSubstr("command not found"));
  EXPECT_EQ(rec.exits[0].ShellStatus(), 127);  // as a shell, and as over SSH
}

TEST(LocalTransport, ResolvesExecutables) {
  // dtrain's own programs come from beside the running executable (here: the build directory).
  EXPECT_EQ(ResolveExecutable("dtrain", ""), std::string(DTRAIN_BINARY_DIR) + "/dtrain");
  EXPECT_EQ(ResolveExecutable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(ResolveExecutable("./x.sh", ""), "./x.sh");
  EXPECT_EQ(ResolveExecutable("sh", "/nonexistent"), "");
  EXPECT_EQ(SelfExecutableDir(), DTRAIN_BINARY_DIR);
}

}  // namespace
}  // namespace dtrain
