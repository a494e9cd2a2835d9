// TransportRecorder: what a transport reports, per process id, kept for the tests to check:
// output of both streams in the order read and stderr alone, each exit and how long after the
// recorder was made it came. Output after an exit, or a second exit, fails the test.
#pragma once

#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "launcher/transport.h"

namespace dtrain::testing {

struct TransportRecorder : TransportEvents {
  using Clock = std::chrono::steady_clock;

  std::map<int, std::string> output;  // both streams, in the order read
  std::map<int, std::string> errors;  // stderr alone
  std::map<int, ExitStatus> exits;
  std::map<int, int> exit_calls;
  std::map<int, double> exit_after_s;
  Clock::time_point start = Clock::now();
  Transport* stop_on_failure = nullptr;  // set: SIGTERM to every process at the first failure

  void OnOutput(int id, OutputStream stream, std::string_view bytes) override {
    EXPECT_EQ(exits.count(id), 0u) << "output after the exit of " << id;
    output[id].append(bytes);
    if (stream == OutputStream::kStderr) errors[id].append(bytes);
  }
  void OnExit(int id, const ExitStatus& status) override {
    EXPECT_EQ(exit_calls[id]++, 0) << "second exit for " << id;
    exits[id] = status;
    exit_after_s[id] = std::chrono::duration<double>(Clock::now() - start).count();
    if (stop_on_failure && !status.ok()) {
      stop_on_failure->SignalAll(SIGTERM);
      stop_on_failure = nullptr;
    }
  }
  // Polls until every process ended and its output was delivered, or `seconds` passed (false).
  bool RunToEnd(Transport& transport, double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (transport.Poll(100, *this)) {
      if (Clock::now() > until) return false;
    }
    return true;
  }
};

}  // namespace dtrain::testing
