// Supervision of one attempt of a job (ninja's SubprocessSet shape): owns the one loop over the
// transport and the interrupt flag set by SIGINT/SIGTERM/SIGHUP. The first rank to fail, or an
// interrupt, brings the job down: SIGTERM to every rank's process group, SIGKILL after the grace
// period. Output goes to the rank logs and the console as it arrives.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "launcher/console_echo.h"
#include "launcher/hangs/stall_watch.h"
#include "launcher/health_watch.h"
#include "launcher/horovod_elastic_rounds.h"
#include "launcher/horovod_rendezvous.h"
#include "launcher/job_file_writer.h"
#include "launcher/job_store.h"
#include "launcher/log_sync.h"
#include "launcher/rank_log.h"
#include "launcher/rank_log_outage.h"
#include "launcher/rank_log_writer.h"
#include "launcher/step_watch.h"
#include "launcher/transport.h"

namespace dtrain {

struct SupervisorOptions {
  double grace_period_s = 10;                     // between SIGTERM and SIGKILL
  StallWatch* stall_watch = nullptr;              // null: no stall watch
  // > 0: a rank that exits with an error code this soon after the start holds the teardown for
  // up to kEarlyHoldS, so ranks failing the same way (an import error) report it themselves and
  // the failure can be told deterministic (restart_policy.h). 0: teardown at once.
  double early_failure_s = 0;
  StepWatch* steps = nullptr;           // null: not watched
  LogSync* log_sync = nullptr;          // the rank logs' syncs (--log-sync); null: none
  JobFileWriter* files = nullptr;       // job.json and the stall reports; null: none
  HealthWatch* health_watch = nullptr;  // null: nodes' health not watched while the job runs
  // Quarantined nodes watched for their return (WatchFor::kReturns); null: none.
  HealthWatch* return_watch = nullptr;
  // Called on the supervisor's thread with each warning of the health watch (may be empty).
  std::function<void(const NodeWarning&)> on_health_warning;
  JobStore* store = nullptr;  // null: no store of dtrain's (rank 0 hosts, or none)
  // An elastic Horovod job's rendezvous (one with elastic() set): a rank that fails does not stop
  // the others; the rounds decide (horovod_elastic_rounds.h). Null: the first failure stops all.
  HorovodRendezvous* elastic = nullptr;
  // An elastic job's node that the health watch found unfit: called on the supervisor's thread
  // with the finding; returns the node's index in the attempt, whose ranks then fail in the
  // rounds at once and are stopped (SIGTERM, SIGKILL after the grace period) while the others go
  // on, or -1 when none is to go (a node that left already). It replaces `watch`, which found
  // what it looked for, with one on the nodes left (or null). Unset: the job stops.
  std::function<int(const UnfitNode&, HealthWatch*& watch)> unfit_leaves;
  // An elastic job's stall under --on-stall stop: called with the report; returns the indices in
  // the attempt of the nodes that leave (those of the ranks the others wait for), whose ranks go
  // as an unfit node's do, and replaces `watch` as unfit_leaves does. Empty (none to go, or no
  // node would be left): the job stops as any other. Unset: the job stops.
  std::function<std::vector<int>(const StallReport&, HealthWatch*& watch)> stall_leaves;
  // An elastic job's node that left and comes back now (--blacklist-cooldown-range): called on
  // the supervisor's thread with how every rank that ended so far ended; returns the node's index
  // in the attempt, whose ranks joined the rounds already, or -1 when none comes back. The
  // round's first rank is then told that hosts were added (horovod_worker_notice.h), and the
  // node's ranks start once the round that lets them in is settled. It replaces `watch` with one on
  // the nodes in the job, as unfit_leaves does. Unset: a node that left stays out.
  std::function<int(const std::map<int, ExitStatus>& ended, HealthWatch*& watch)> elastic_rejoins;
  // An elastic job's nodes that --host-discovery-script no longer lists, taken out of the rounds
  // (HorovodElasticRounds::Remove): called on the supervisor's thread; returns their indices in
  // the attempt. The round's first rank is then told that hosts were removed; once the round is
  // settled without them, their ranks (answered "-1") end on their own, or are stopped after the
  // grace period. It replaces `watch` as unfit_leaves does. Unset: none.
  std::function<std::vector<int>(HealthWatch*& watch)> elastic_removals;
  // Called on the supervisor's thread with each straggler the stall watch's straggler watch
  // names; true: its node leaves (the job stops as for an unfit node, UnfitNode::straggler).
  std::function<bool(const Straggler&)> on_straggler;
  // Called on the supervisor's thread with each new round of an elastic job and how every rank
  // that ended so far ended.
  std::function<void(const ElasticRoundChange&, const std::map<int, ExitStatus>&)>
      on_elastic_change;
};

constexpr double kEarlyHoldS = 1.5;

// What dtrain exits with when the health watch stopped the job and no restart followed: ssh's
// status for a node that cannot be used (ssh_preflight.h's kExitNodeUnusable).
constexpr int kExitNodeUnfit = 255;

// How an attempt ended. `exit_code` is what dtrain exits with: 0, the first failing rank's
// status (128+signal for a signal), or 128+signal of the interrupt that stopped it.
struct JobOutcome {
  int exit_code = 0;
  int failed_rank = -1;  // -1: no rank failed first (success, or an interrupt)
  int interrupt_signal = 0;
  std::optional<StallReport> stall;  // set when the job was stopped for a stall (exit 124)
  std::optional<UnfitNode> unfit;    // set when the health watch stopped it (exit 255)
  std::string store_failure;         // set when the job's store failed (exit 1): why
  std::string returned;  // a quarantined node fit again: the attempt was stopped to take it back
  std::string elastic_failure;         // an elastic Horovod job could not go on: why
  bool store_listened = false;         // ... after it had listened
  std::map<int, ExitStatus> statuses;  // every rank that ended
  std::map<int, int64_t> ended_us;     // when each rank's end was seen (wall clock)
  int64_t failed_us = 0;               // when the first failure (or stall stop) was seen
};

// Installs the interrupt handlers (SIGINT, SIGTERM, SIGHUP, SIGQUIT and those of HandleAlso set
// the flag JobSupervisor reads; SIGPIPE is ignored) for the lifetime of the object and restores
// the old ones.
class InterruptHandlers {
 public:
  InterruptHandlers();
  ~InterruptHandlers();
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

  // More signals to handle, in every InterruptHandlers made from now on (--signals-to-handle,
  // handled_signals.h).
  static void HandleAlso(const std::vector<int>& signals);

 private:
  std::vector<std::pair<int, struct sigaction>> old_;
  struct sigaction old_pipe_ {};
};

// Events from the transport, fanned out to the rank logs and the console, with the first
// failure noted. Runs one attempt; make a new one (with a new transport) to restart.
class JobSupervisor : public TransportEvents {
 public:
  JobSupervisor(Transport& transport, RankLogWriter& logs, ConsoleEcho& console,
                SupervisorOptions options);

  JobOutcome Run(const std::vector<ProcessSpec>& procs);

  void OnOutput(int id, OutputStream stream, std::string_view bytes) override;
  void OnExit(int id, const ExitStatus& status) override;

  // The signal that interrupted dtrain (0 if none). Stays set after Run returns, so a caller
  // that restarts jobs knows not to.
  static int InterruptSignal();

 private:
  void BeginStop(int sig);
  void WatchElasticRounds();
  // `grace_s`: between the SIGTERM of its ranks (all ranks, unless it leaves an elastic job) and
  // their SIGKILL.
  void Unfit(UnfitNode unfit, double grace_s);
  void Stalled(StallReport stall);
  void Straggling(const Straggler& straggler);
  void Leave(int node, double grace_s);
  void Rejoin(int node);
  void Notify(int update);
  void StartJoined(const ElasticRoundChange& change);
  void SayNotice();
  void SayNoNotice(const std::string& worker, const std::string& why, int update);
  bool NodeRuns(int node) const;

  Transport& transport_;
  RankLogWriter& logs_;
  ConsoleEcho& console_;
  SupervisorOptions options_;
  JobOutcome outcome_;
  bool stopping_ = false;
  bool drive_hang_said_ = false;  // a stuck sync or write under the job's folder was said
  double stop_grace_s_;  // between the stop's SIGTERM and SIGKILL: the grace period, or more
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point hold_until_ = std::chrono::steady_clock::time_point::max();
  std::vector<ProcessSpec> procs_;  // as started, for the ranks of a node
  // Nodes whose ranks leave an elastic job: when they get SIGKILL.
  std::map<int, std::chrono::steady_clock::time_point> leaving_;
  // Nodes taken out of an elastic job whose round was settled: when their ranks, if still
  // running, are stopped.
  std::map<int, std::chrono::steady_clock::time_point> removed_;
  // The host-update notification under way (Rejoin), and the worker it is for.
  std::future<std::string> notice_;
  std::string notice_worker_;
  int notice_update_ = 0;          // the notification under way: kHostsAdded or kHostsRemoved
  std::set<int> never_started_;    // ranks absent from the first round, not started yet
  int64_t last_notice_s_ = 0;      // the last notification's timestamp
  bool waited_for_nodes_ = false;  // the ranks waited for nodes (fewer than --min-np)
};

}  // namespace dtrain
