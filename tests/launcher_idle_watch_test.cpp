// The node-side dead-man switch of what reads dtrain's stream (templates/idle_watch.sh), run here
// as a node runs it: the heartbeat's echo answers every "." and ends by itself once none came
// for the node timeout, not while they come; at EOF it ends at once and its watch holds the
// channel open no longer; a wait on the node's own file system or a lock is not counted.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "launcher/node_clock.h"
#include "launcher/shell_quote.h"
#include "launcher/ssh/idle_watch.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `command` under /bin/sh -c, as sshd runs a channel's command: stdin and stdout are pipes here.
class Channel {
 public:
  explicit Channel(const std::string& command) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
  }
  ~Channel() {
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
    if (pid_ > 0 && status_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  void Write(const std::string& text) {
    ASSERT_EQ(::write(in_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  void CloseInput() {
    ::close(in_);
    in_ = -1;
  }
  // What came out within `seconds`, until EOF; `eof` says whether it came.
  std::string Read(double seconds, bool& eof) {
    std::string text;
    eof = false;
    const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (Clock::now() < until) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char buffer[256];
      const ssize_t n = ::read(out_, buffer, sizeof buffer);
      if (n <= 0) {
        eof = true;
        break;
      }
      text.append(buffer, n);
    }
    return text;
  }
  bool Running() {
    if (status_ >= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
    status_ = status;
    return false;
  }
  // Waits up to `seconds` for the end; the wait status, -1 when it still runs.
  int Wait(double seconds) {
    const auto start = Clock::now();
    while (Running() && Since(start) < seconds) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  int status_ = -1;
};

TEST(IdleWatch, TheHeartbeatsEchoAnswersWhileDtrainSendsAndEndsOnceItWentSilent) {
  Channel channel(HeartbeatCommand(2));
  ASSERT_TRUE(channel.started());
  std::string echoed;
  bool eof = false;
  for (int beat = 0; beat < 8; ++beat) {  // 4 s: twice the node timeout, and it still runs
    channel.Write(".");
    echoed += channel.Read(0.5, eof);
  }
  EXPECT_EQ(echoed, "........");
  EXPECT_TRUE(channel.Running()) << "ended while dtrain still sent";
  const auto silent = Clock::now();
  const int status = channel.Wait(10);
  const double ended_s = Since(silent);
  ASSERT_NE(status, -1) << "still ran 10 s after dtrain went silent";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  // The timeout, plus at most one look (every second at a 2 s timeout) and the last beat's half.
  EXPECT_GE(ended_s, 1.4);
  EXPECT_LE(ended_s, 2 + 1 + 0.5 + 0.5);
}

TEST(IdleWatch, AtEofTheEchoEndsAtOnceAndItsWatchHoldsNoChannelOpen) {
  Channel channel(HeartbeatCommand(10));
  ASSERT_TRUE(channel.started());
  channel.Write(".");
  bool eof = false;
  EXPECT_EQ(channel.Read(0.5, eof), ".");
  const auto closed = Clock::now();
  channel.CloseInput();
  channel.Read(3, eof);
  EXPECT_TRUE(eof);
  EXPECT_LT(Since(closed), 0.5) << "the watch's sleep held the channel's output open";
  const int status = channel.Wait(2);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The clock probe's loop answers each ping with the node's clock and ends by itself too (bash's
// read timing out here: this machine has bash 5).
TEST(IdleWatch, TheClockProbeAnswersPingsAndEndsOnceThePingsStopped) {
  std::string command;
  for (const std::string& word : NodeClockCommand(2)) command += ShellQuote(word) + " ";
  Channel channel(command);
  ASSERT_TRUE(channel.started());
  bool eof = false;
  const auto pinged = Clock::now();
  channel.Write("ping\n");
  const std::string answer = channel.Read(1, eof);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(std::atof(answer.c_str()), now, 5) << answer;
  ASSERT_NE(channel.Wait(10), -1) << "still ran 10 s after the pings stopped";
  EXPECT_GE(Since(pinged), 1.9);
  EXPECT_LE(Since(pinged), 2 + 1);
}

// What /proc/PID/wchan names for a process asleep in nanosleep; "" where it cannot be read.
std::string WchanOfASleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sleep", "sleep", "5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string wchan;
  if (FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/wchan").c_str(), "r")) {
    char buffer[128] = {};
    if (std::fgets(buffer, sizeof buffer, f) != nullptr) wchan = buffer;
    std::fclose(f);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return wchan;
}

// A wait of the node's own (here a file lock; a tar writing into a FUSE or NFS mount waits so)
// is not dtrain gone silent: the watch lets it wait three times the timeout. Once the process
// waits on its channel again, and nothing comes, it is ended as before.
TEST(IdleWatch, AWaitOnTheNodesFileSystemIsNotCountedButOneOnTheChannelIs) {
  const std::string sleeper = WchanOfASleeper();
  if (sleeper.empty() || sleeper == "0") {
    GTEST_SKIP() << "this kernel does not name a process's wait in /proc/PID/wchan ('" << sleeper
                 << "'): every idle second counts there";
  }
  char lock_path[] = "/tmp/dtrain-idle-watch-lock.XXXXXX";
  const int lock = ::mkstemp(lock_path);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  Channel channel(IdleWatchFunction() +
                  "\n(dtrain_idle_watch $$ 2) </dev/null >/dev/null 2>&1 &\n"
                  "exec perl -e 'open(my $f, \"<\", $ARGV[0]) or die; flock($f, 2) or die; "
                  "syswrite(STDOUT, \"locked\\n\"); while (<STDIN>) { syswrite(STDOUT, $_) }' " +
                  lock_path);
  ASSERT_TRUE(channel.started());
  bool eof = false;
  EXPECT_EQ(channel.Read(6, eof), "") << "took the lock another process holds";
  EXPECT_TRUE(channel.Running()) << "ended while it waited on a file lock";
  ::flock(lock, LOCK_UN);
  const auto locked = Clock::now();
  EXPECT_EQ(channel.Read(1, eof), "locked\n");
  const int status = channel.Wait(10);
  ASSERT_NE(status, -1) << "still ran 10 s after it waited on its silent channel";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_GE(Since(locked), 1.4);
  EXPECT_LE(Since(locked), 2 + 1 + 1);
  ::close(lock);
  ::unlink(lock_path);
}

TEST(IdleWatch, SecondsAreTheNodeTimeoutRoundedUpAndNoneWithout) {
  EXPECT_EQ(IdleWatchSeconds(0), 0);
  EXPECT_EQ(IdleWatchSeconds(-1), 0);
  EXPECT_EQ(IdleWatchSeconds(0.2), 1);
  EXPECT_EQ(IdleWatchSeconds(2.5), 3);
  EXPECT_EQ(IdleWatchSeconds(10), 10);
}

}  // namespace
}  // namespace dtrain
