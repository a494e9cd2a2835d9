#include "launcher/shm_leftovers.h"

#include <poll.h>

#include <chrono>
#include <csignal>

#include "launcher/subprocess.h"
#include "launcher/this_machine.h"

namespace dtrain {

std::string RemoveShmLeftovers(std::time_t since, double timeout_s) {
  SubprocessOptions options;
  options.argv = {"/bin/sh",
                  "-c",
                  std::string(ShmSegmentsScript()) + "\ndtrain_shm_remove \"$1\" \"$2\"",
                  "dtrain-shm",
                  std::to_string(static_cast<long long>(since)),
                  ThisHostName()};
  options.err = Stdio::kNull;
  Subprocess sh;
  if (!sh.Start(options).empty()) return "";
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (sh.out_fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      sh.SignalGroup(SIGKILL);  // a /proc read that hangs: the segments stay, the launch ends
      break;
    }
    pollfd p{sh.out_fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const size_t n = Subprocess::Read(sh.out_fd, buffer, sizeof buffer);
    out.append(buffer, n);
  }
  sh.Finish();
  return out;
}

}  // namespace dtrain
