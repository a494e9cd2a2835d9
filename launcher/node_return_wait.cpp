#include "launcher/node_return_wait.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "launcher/health_watch.h"
#include "launcher/job_record.h"
#include "launcher/job_supervisor.h"
#include "launcher/node_health_checks.h"
#include "launcher/rank_log.h"

namespace dtrain {

std::vector<int> WaitForReturningNodes(Job& job, double& waited_s) {
  using Clock = std::chrono::steady_clock;
  waited_s = 0;
  if (job.settings.health_watch_s <= 0 || job.pool.MayReturn().empty()) return {};
  const double timeout_s = job.settings.join_timeout_s;
  std::fprintf(stderr,
               "dtrain: job %s is short of nodes (%s): it waits up to %g s (torchrun's "
               "join_timeout, --rdzv-conf join_timeout=S) for a quarantined node to pass the "
               "health checks %d rounds in a row\n",
               job.record.name.c_str(), job.pool.why_not().c_str(), timeout_s, kReturnRounds);
  InterruptHandlers handlers;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  std::unique_ptr<HealthWatch> watch;
  std::vector<int> watched;
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  while (Clock::now() < deadline && JobSupervisor::InterruptSignal() == 0) {
    const std::vector<int> may_return = job.pool.MayReturn();
    if (may_return.empty()) break;  // every node that could return did, or came back once
    if (may_return != watched) {
      watched = may_return;
      watch = std::make_unique<HealthWatch>(
          job.options.check_nodes, AttemptSpec(job.spec, may_return), job.settings.health_watch_s,
          /*checked=*/false, WatchFor::kReturns);
    }
    if (std::optional<std::string> host = watch->TakeReturned()) {
      TakeBack(job, NodeIndex(job.spec, *host));
      const std::string detail = fmt::format(
          "node {} passed the health checks {} rounds in a row after {:.1f} s of the "
          "wait; it takes part again",
          *host, kReturnRounds, since());
      std::fprintf(stderr, "dtrain: %s\n", detail.c_str());
      job.record.events.push_back({WallMicros(), "node_returned", detail, ""});
      WriteJobRecord(job.folder.job_dir, job.record);
      watched.clear();  // a fresh watch for those still out
      std::vector<int> picked = job.pool.Pick();
      if (!picked.empty()) {
        waited_s = since();
        return picked;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  waited_s = since();
  return {};
}

}  // namespace dtrain
