// Waiting in a test for something another process does, polled every 20 ms up to a limit.
#pragma once

#include <chrono>
#include <thread>

namespace dtrain::testing {

// Waits until `predicate` holds (true) or `timeout_s` passes (false).
template <class Predicate>
bool WaitFor(Predicate predicate, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace dtrain::testing
