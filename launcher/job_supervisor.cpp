// The loop: poll the transport, log what arrives, and on the first failure or interrupt stop
// every rank (SIGTERM, then SIGKILL once the grace period is over).
#include "launcher/job_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/handled_signals.h"

namespace dtrain {
namespace {

// How long the round's first rank has to acknowledge a host-update notification, per address.
constexpr double kNoticeTimeoutS = 10;

// A rank's place in an elastic round, in Horovod's variables, as horovodrun starts a worker.
void PlaceInEnv(const HorovodSlotInfo& slot, std::map<std::string, std::string>& env) {
  env["HOROVOD_RANK"] = std::to_string(slot.rank);
  env["HOROVOD_SIZE"] = std::to_string(slot.size);
  env["HOROVOD_LOCAL_RANK"] = std::to_string(slot.local_rank);
  env["HOROVOD_LOCAL_SIZE"] = std::to_string(slot.local_size);
  env["HOROVOD_CROSS_RANK"] = std::to_string(slot.cross_rank);
  env["HOROVOD_CROSS_SIZE"] = std::to_string(slot.cross_size);
}

volatile sig_atomic_t g_interrupt_signal = 0;
volatile sig_atomic_t g_interrupt_count = 0;

void OnInterrupt(int sig) {
  g_interrupt_signal = sig;
  g_interrupt_count = g_interrupt_count + 1;
}

std::vector<int>& HandledSignals() {
  static std::vector<int> signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  return signals;
}

}  // namespace

void InterruptHandlers::HandleAlso(const std::vector<int>& signals) {
  for (int sig : signals) {
    std::vector<int>& handled = HandledSignals();
    if (std::find(handled.begin(), handled.end(), sig) == handled.end()) handled.push_back(sig);
  }
}

InterruptHandlers::InterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  for (int sig : HandledSignals()) {
    old_.emplace_back(sig, (struct sigaction){});
    ::sigaction(sig, &action, &old_.back().second);
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old_pipe_);  // a closed console must not kill dtrain
}

InterruptHandlers::~InterruptHandlers() {
  for (const auto& [sig, old] : old_) ::sigaction(sig, &old, nullptr);
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
}

int JobSupervisor::InterruptSignal() {
  return g_interrupt_signal;
}

JobSupervisor::JobSupervisor(Transport& transport, RankLogWriter& logs, ConsoleEcho& console,
                             SupervisorOptions options)
    : transport_(transport),
      logs_(logs),
      console_(console),
      options_(options),
      stop_grace_s_(options.grace_period_s) {}

void JobSupervisor::OnOutput(int id, OutputStream stream, std::string_view bytes) {
  logs_.Output(id, stream, bytes, WallMicros());
  console_.Output(id, stream, bytes);
  if (options_.stall_watch) options_.stall_watch->OnOutput(id);
}

void JobSupervisor::OnExit(int id, const ExitStatus& status) {
  console_.Finish(id);
  logs_.Finish(id);
  if (!status.error.empty()) {
    // The rank never ran: say so in its log too, so the log explains the failure on its own.
    logs_.Append(id, "dtrain: " + status.Describe() + "\n", WallMicros());
  }
  outcome_.statuses[id] = status;
  outcome_.ended_us[id] = WallMicros();
  if (options_.stall_watch) options_.stall_watch->OnExit(id, status);
  if (options_.elastic && !stopping_) {
    // The rounds decide whether the job goes on (WatchElasticRounds).
    options_.elastic->RankEnded(id, status.ok());
    return;
  }
  if (!status.ok() && outcome_.failed_rank < 0 && !stopping_) {
    outcome_.failed_rank = id;
    outcome_.exit_code = status.ShellStatus();
    outcome_.failed_us = WallMicros();
    const auto now = std::chrono::steady_clock::now();
    const bool plain_error = status.error.empty() && status.signal == 0;
    if (plain_error && now - started_ < std::chrono::duration<double>(options_.early_failure_s)) {
      hold_until_ = now + std::chrono::milliseconds(static_cast<int>(kEarlyHoldS * 1000));
      return;
    }
  }
  if (!status.ok() && !stopping_ &&
      (!status.error.empty() || status.signal != 0 ||
       hold_until_ == std::chrono::steady_clock::time_point::max())) {
    BeginStop(SIGTERM);  // a lost node or a signal ends a hold at once
  }
}

// An elastic job ends when its rounds say so: failed (torn down as for a failing rank, the rank
// blamed being the last that failed) or done (whatever still runs left the job and is stopped).
void JobSupervisor::WatchElasticRounds() {
  HorovodElasticRounds& rounds = *options_.elastic->elastic();
  const bool waiting = rounds.waiting_since().has_value();
  if (waiting) {
    rounds.CheckWait(std::chrono::steady_clock::now());
    if (rounds.verdict() != HorovodElasticRounds::Verdict::kRunning)
      options_.elastic->ElasticChanged();  // the waiting ranks are told to leave
  } else if (waited_for_nodes_ && options_.stall_watch) {
    // The stall watch paused while the ranks waited for nodes: watched afresh from their round.
    for (const ProcessSpec& proc : procs_) {
      if (!outcome_.statuses.count(proc.id)) options_.stall_watch->OnRestart(proc.id);
    }
  }
  waited_for_nodes_ = waiting;
  for (const ElasticRoundChange& change : rounds.TakeChanges()) {
    if (options_.on_elastic_change) options_.on_elastic_change(change, outcome_.statuses);
    if (!change.joined_ranks.empty() && rounds.verdict() == HorovodElasticRounds::Verdict::kRunning)
      StartJoined(change);
    // The ranks of nodes taken out were answered "-1": they end on their own, or are stopped.
    for (int rank : change.removed_ranks) {
      for (const ProcessSpec& proc : procs_) {
        if (proc.id == rank && !removed_.count(proc.node_index)) {
          removed_[proc.node_index] =
              std::chrono::steady_clock::now() +
              std::chrono::milliseconds(static_cast<long long>(options_.grace_period_s * 1000));
        }
      }
    }
  }
  const HorovodElasticRounds::Verdict verdict = rounds.verdict();
  if (verdict == HorovodElasticRounds::Verdict::kRunning) return;
  if (verdict == HorovodElasticRounds::Verdict::kFailed) {
    const int rank = rounds.blamed_rank();
    auto status = outcome_.statuses.find(rank);
    outcome_.failed_rank = rank;
    outcome_.exit_code = status != outcome_.statuses.end() && !status->second.ok()
                             ? status->second.ShellStatus()
                             : kExitFailure;
    outcome_.failed_us = WallMicros();
    outcome_.elastic_failure = rounds.why_failed();
  }
  BeginStop(SIGTERM);
}

// A node the health watch found unfit: an elastic job goes on without it; any other job is torn
// down as for a failing rank (no rank failed: the node did).
void JobSupervisor::Unfit(UnfitNode unfit, double grace_s) {
  if (options_.elastic && options_.unfit_leaves) {
    const int node = options_.unfit_leaves(unfit, options_.health_watch);
    if (node >= 0) Leave(node, grace_s);
    return;
  }
  outcome_.exit_code = kExitNodeUnfit;
  outcome_.failed_us = WallMicros();
  outcome_.unfit = std::move(unfit);
  stop_grace_s_ = grace_s;
  BeginStop(SIGTERM);
}

// A rank the straggler watch named: said; its node leaves when the answer says so, as an unfit
// node's does, with time for the slow rank to reach a checkpoint (StragglerGraceSeconds).
void JobSupervisor::Straggling(const Straggler& straggler) {
  if (!options_.on_straggler || !options_.on_straggler(straggler)) return;
  UnfitNode slow;
  slow.host = straggler.host;
  slow.why = "a straggler: " + straggler.Describe();
  slow.found_after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  slow.straggler = true;
  Unfit(std::move(slow), StragglerGraceSeconds(options_.grace_period_s, straggler));
}

// A stall under --on-stall stop: in an elastic job the nodes of the ranks the others wait for
// leave it; any other job is torn down as for a failing rank, the rank named the one blamed.
void JobSupervisor::Stalled(StallReport stall) {
  if (options_.elastic && options_.stall_leaves) {
    const std::vector<int> nodes = options_.stall_leaves(stall, options_.health_watch);
    for (int node : nodes) Leave(node, options_.grace_period_s);
    if (!nodes.empty()) return;
  }
  outcome_.exit_code = kExitStalled;
  outcome_.failed_us = WallMicros();
  outcome_.failed_rank = stall.culprits.empty() ? -1 : stall.culprits.front();
  outcome_.stall = std::move(stall);
  BeginStop(SIGTERM);
}

// A node leaves an elastic job: its ranks fail in the rounds at once, get SIGTERM now and
// SIGKILL `grace_s` later (the grace period, or more for a straggler), while the others go on.
void JobSupervisor::Leave(int node, double grace_s) {
  for (const ProcessSpec& proc : procs_) {
    if (proc.node_index == node) options_.elastic->RankEnded(proc.id, false);
  }
  transport_.SignalNode(node, SIGTERM);
  leaving_[node] = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long long>(grace_s * 1000));
}

// A node that left an elastic job comes back (its ranks joined the rounds): the round's first
// rank is told, off this thread, that hosts were added, so that the ranks in the job reset at
// their next commit and ask for their place; the new ranks start once the round is settled
// (StartJoined), as horovodrun's driver starts a host's workers after the others' barrier.
void JobSupervisor::Rejoin(int node) {
  leaving_.erase(node);
  removed_.erase(node);
  // The ranks waiting for nodes settled the round with this node's at once: they are answered,
  // and no notification is due (it would make them reset once more).
  options_.elastic->ElasticChanged();
  for (const ProcessSpec& proc : procs_) {
    if (proc.node_index == node && options_.elastic->elastic()->Slot(proc.id)) return;
  }
  Notify(kHostsAdded);
}

// The round's first rank is told that hosts were added or removed (horovod_worker_notice.h).
void JobSupervisor::Notify(int update) {
  const std::string key = options_.elastic->elastic()->CoordinatorKey();
  std::string why = "no rank is Horovod's rank 0 of the round";
  std::optional<HorovodWorkerService> service;
  if (!key.empty()) service = options_.elastic->Worker(key, why);
  if (!service) return SayNoNotice(key, why, update);
  if (notice_.valid()) {  // one at a time
    notice_.wait();
    SayNotice();
  }
  // Horovod acts on a notification newer than the last it saw, in whole seconds.
  last_notice_s_ = std::max(last_notice_s_ + 1, WallMicros() / 1000000);
  // Told of a removal alone, Horovod's ranks skip the state sync after their reset (they hold the
  // same state), while a node that joins the same round (one listed meanwhile, or the one the
  // ranks wait for below --min-np) syncs from rank 0: the two would wait on each other for ever.
  // So a removal is told as a change both ways, and the ranks always sync.
  const int res = update == kHostsRemoved ? kHostsRemoved | kHostsAdded : update;
  notice_ =
      std::async(std::launch::async, [service = std::move(*service), t = last_notice_s_, res] {
        return NotifyHostsUpdated(service, t, res, kNoticeTimeoutS);
      });
  notice_worker_ = key;
  notice_update_ = update;
}

// A round settled with ranks that joined: each starts again (its log marked) with its place in
// the round in Horovod's variables, as horovodrun starts a new worker; its first hvd.init() meets
// the others in the round's rendezvous.
void JobSupervisor::StartJoined(const ElasticRoundChange& change) {
  HorovodElasticRounds& rounds = *options_.elastic->elastic();
  std::vector<ProcessSpec> again;
  for (ProcessSpec proc : procs_) {
    if (std::find(change.joined_ranks.begin(), change.joined_ranks.end(), proc.id) ==
        change.joined_ranks.end())
      continue;
    const std::optional<HorovodSlotInfo> slot = rounds.Slot(proc.id);
    if (!slot) continue;
    PlaceInEnv(*slot, proc.env);
    const bool first = never_started_.erase(proc.id) > 0;  // a node the script lists only now
    outcome_.statuses.erase(proc.id);
    outcome_.ended_us.erase(proc.id);
    if (options_.stall_watch) options_.stall_watch->OnRestart(proc.id);
    logs_.MarkRestart(proc.id,
                      fmt::format("rank joins the elastic Horovod job {}in round {}",
                                  first ? "" : "again ", change.round),
                      WallMicros());
    again.push_back(std::move(proc));
  }
  if (!again.empty()) transport_.Start(again, *this);
}

// The notification's end: said only when it failed.
void JobSupervisor::SayNotice() {
  if (!notice_.valid() || notice_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  const std::string why = notice_.get();
  if (!why.empty()) SayNoNotice(notice_worker_, why, notice_update_);
}

void JobSupervisor::SayNoNotice(const std::string& worker, const std::string& why, int update) {
  std::fprintf(stderr,
               "dtrain: warning: cannot tell the elastic Horovod job that ranks %s: worker "
               "%s: %s; they %s when the others next reset\n",
               update == kHostsRemoved ? "leave" : "join", worker.c_str(), why.c_str(),
               update == kHostsRemoved ? "leave" : "start");
}

// Whether a rank of node `node` runs (started and not seen to end).
bool JobSupervisor::NodeRuns(int node) const {
  for (const ProcessSpec& proc : procs_) {
    if (proc.node_index == node && !outcome_.statuses.count(proc.id) &&
        !never_started_.count(proc.id))
      return true;
  }
  return false;
}

void JobSupervisor::BeginStop(int sig) {
  stopping_ = true;
  transport_.SignalAll(sig);
}

JobOutcome JobSupervisor::Run(const std::vector<ProcessSpec>& procs) {
  using Clock = std::chrono::steady_clock;
  InterruptHandlers handlers;
  started_ = Clock::now();
  procs_ = procs;
  std::vector<ProcessSpec> first = procs;
  if (options_.elastic) {
    // Ranks absent from an elastic job's first round (their node not listed yet) start when
    // their node joins; the others get their place in it when some are absent.
    HorovodElasticRounds& rounds = *options_.elastic->elastic();
    first.clear();
    std::vector<std::pair<ProcessSpec, HorovodSlotInfo>> placed;
    for (const ProcessSpec& proc : procs) {
      if (std::optional<HorovodSlotInfo> slot = rounds.Slot(proc.id)) {
        placed.emplace_back(proc, *slot);
        continue;
      }
      never_started_.insert(proc.id);
      if (options_.stall_watch) options_.stall_watch->OnExit(proc.id, ExitStatus{});
    }
    for (auto& [proc, slot] : placed) {
      if (!never_started_.empty()) PlaceInEnv(slot, proc.env);
      first.push_back(std::move(proc));
    }
  }
  if (g_interrupt_signal == 0) transport_.Start(first, *this);
  // A rank that could not start stops the job from inside Start; ranks started after it
  // must hear that too.
  if (stopping_) transport_.SignalAll(SIGTERM);
  Clock::time_point kill_at = Clock::time_point::max();
  bool killed = false;
  int seen_interrupts = 0;
  for (;;) {
    if (g_interrupt_count > seen_interrupts) {
      // First interrupt: stop gracefully. Another one: stop now.
      if (seen_interrupts == 0 && outcome_.failed_rank < 0) {
        outcome_.interrupt_signal = g_interrupt_signal;
        outcome_.exit_code = 128 + g_interrupt_signal;
      }
      if (stopping_ || seen_interrupts > 0) {
        transport_.SignalAll(SIGKILL);
        killed = true;
      } else {
        BeginStop(ClosingSignal(g_interrupt_signal));  // SIGTERM, or a --signals-to-handle one
      }
      seen_interrupts = g_interrupt_count;
    }
    if (stopping_ && kill_at == Clock::time_point::max()) {
      kill_at =
          Clock::now() + std::chrono::milliseconds(static_cast<long long>(stop_grace_s_ * 1000));
    }
    if (stopping_ && !killed && Clock::now() >= kill_at) {
      transport_.SignalAll(SIGKILL);
      killed = true;
    }
    if (!stopping_ && Clock::now() >= hold_until_) BeginStop(SIGTERM);
    if (!transport_.Poll(100, *this)) break;
    if (options_.steps) options_.steps->Tick();
    if (options_.log_sync) {
      if (std::optional<LogSyncFailure> failed = options_.log_sync->TakeFirstFailure())
        SayLogSyncFailed(stderr, *failed);
      if (std::optional<LogSyncStuck> stuck = options_.log_sync->TakeStuck(LogSync::kStuckS))
        SayLogSyncStuck(stderr, *stuck, std::exchange(drive_hang_said_, true));
    }
    if (std::optional<LogWriteStuck> stuck = logs_.TakeStuck(LogSync::kStuckS))
      SayLogWriteStuck(stderr, *stuck, std::exchange(drive_hang_said_, true));
    if (options_.files) {
      if (std::optional<FileWriteStuck> stuck = options_.files->TakeStuck(LogSync::kStuckS))
        SayFileWriteStuck(stderr, *stuck, std::exchange(drive_hang_said_, true));
    }
    if (options_.health_watch && options_.on_health_warning) {
      for (const NodeWarning& w : options_.health_watch->TakeWarnings()) {
        options_.on_health_warning(w);
      }
    }
    if (options_.health_watch && !stopping_) {
      if (std::optional<UnfitNode> unfit = options_.health_watch->Take())
        Unfit(std::move(*unfit), options_.grace_period_s);
    }
    for (auto it = leaving_.begin(); it != leaving_.end();) {
      if (stopping_ || Clock::now() < it->second) {
        ++it;
        continue;
      }
      transport_.SignalNode(it->first, SIGKILL);
      it = leaving_.erase(it);
    }
    if (options_.return_watch && !stopping_) {
      if (std::optional<std::string> host = options_.return_watch->TakeReturned()) {
        // Stopped as for an interrupt: no rank failed, and none is blamed.
        outcome_.returned = std::move(*host);
        BeginStop(SIGTERM);
      }
    }
    if (options_.elastic && options_.elastic_rejoins && !stopping_) {
      const int node = options_.elastic_rejoins(outcome_.statuses, options_.health_watch);
      if (node >= 0) Rejoin(node);
      SayNotice();
    }
    if (options_.elastic && options_.elastic_removals && !stopping_) {
      // Ranks waiting for nodes asked already: they need no notification.
      if (!options_.elastic_removals(options_.health_watch).empty() &&
          !options_.elastic->elastic()->waiting_since())
        Notify(kHostsRemoved);
    }
    for (auto it = removed_.begin(); it != removed_.end();) {
      if (stopping_ || Clock::now() < it->second) {
        ++it;
        continue;
      }
      if (NodeRuns(it->first)) Leave(it->first, options_.grace_period_s);
      it = removed_.erase(it);
    }
    if (options_.elastic && !stopping_) WatchElasticRounds();
    if (options_.store && !stopping_) {
      std::string why = options_.store->Check();
      if (!why.empty()) {
        // Torn down as for a failing rank; no rank failed: the ranks' store did.
        outcome_.exit_code = kExitFailure;
        outcome_.failed_us = WallMicros();
        outcome_.store_failure = std::move(why);
        outcome_.store_listened = options_.store->listening();
        BeginStop(SIGTERM);
      }
    }
    // While the ranks of an elastic job wait for nodes, none makes progress: no stall then.
    if (options_.stall_watch && !stopping_ && !waited_for_nodes_) {
      std::optional<StallReport> stall = options_.stall_watch->Tick();
      if (stall && options_.stall_watch->on_stall() == OnStall::kStop) Stalled(std::move(*stall));
      if (std::optional<Straggler> slow = options_.stall_watch->TakeStraggler(); slow && !stopping_)
        Straggling(*slow);
    }
  }
  if (options_.elastic && !stopping_) WatchElasticRounds();  // the last rank's end settled it
  // Whatever the ranks left behind in their process groups goes with them.
  transport_.SignalAll(SIGKILL);
  return outcome_;
}

}  // namespace dtrain
