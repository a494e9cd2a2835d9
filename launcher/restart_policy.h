// What ended an attempt of a job and what follows from it (torchrun's --max-restarts, one budget
// for the whole job): the cause (node lost, rank killed by a signal, stall stop, the program's
// own error), the node blamed, whether to try again (never for an error every rank hit the same
// way right after start: it would only happen again) and how long to wait first.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/job_supervisor.h"
#include "launcher/rank_plan.h"

namespace dtrain {

// An error is deterministic when every rank (two or more) exited by itself with the same non-zero
// code within this many seconds of the attempt's start (an import error, a bad argument).
constexpr double kEarlyFailureS = 10;

struct AttemptVerdict {
  std::string cause;        // "" (succeeded), node-lost, unhealthy, signal, oom, stall,
                            // collective-timeout, store, error, interrupted
  std::string blamed_host;  // "" when no node is to blame
  bool node_lost = false;   // the blamed node is gone (quarantined at once)
  bool deterministic = false;
  std::string detail;  // one line: "node gpu-b lost: no answer for 10 s, last seen 12:01:07"
};

// "the job's TCPStore on node N failed: <why>": the store runs on the plan's first node.
std::string StoreFailure(const RankPlan& plan, const std::string& why);

// `interrupt`: the signal that interrupted dtrain (0: none).
AttemptVerdict JudgeAttempt(const RankPlan& plan, const JobOutcome& outcome, int64_t started_us,
                            int interrupt);

// True when `text` (a rank's root cause and last log lines) says a collective timed out: NCCL's
// watchdog ("Watchdog caught collective operation timeout"), Gloo ("Timed out waiting 30000ms
// for recv operation to complete"), c10d's DistBackendError or dtrain-clip's communicator.
bool SaysCollectiveTimedOut(const std::string& text);

// An error or signal (NCCL's watchdog aborts the process) whose `text` says a collective timed
// out becomes cause "collective-timeout". The rank that waited is not to blame: the node blamed
// is that of the rank dtrain-clip names as missing ("rank 3 has not entered it"), else none.
// Other verdicts are left as they are.
void MarkCollectiveTimeout(const RankPlan& plan, AttemptVerdict& verdict, const std::string& text);

// A rank killed by SIGKILL (or exit 137) whose `text` says the kernel's OOM killer did it
// (oom_kill.h) becomes cause "oom", and no node is blamed: it is the job's memory use, not a
// faulty node. Other verdicts are left as they are.
void MarkOutOfMemory(const ExitStatus& status, AttemptVerdict& verdict, const std::string& text);

// A rank whose `text` (its root cause first) says its watchdog timer expired and killed it
// (templates/file_timer_server.py) becomes cause "watchdog-timer", the scope named in the
// detail. Other verdicts are left as they are.
void MarkWatchdogTimer(AttemptVerdict& verdict, const std::string& text);

// Seconds to wait before restart `restart` (1, 2, ...): 1, 2, 4, ... at most kMaxBackoffS.
constexpr double kMaxBackoffS = 30;
double BackoffSeconds(int restart);

}  // namespace dtrain
