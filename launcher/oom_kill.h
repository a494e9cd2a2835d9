// The kernel's OOM killer, as a launcher sees the rank it ended: SIGKILL from no one the launcher
// knows, while the node's count of OOM kills (`oom_kill` in /proc/vmstat, readable by every user
// since Linux 4.13; memory-cgroup kills count too) went up. Where the kernel log is readable it
// also names the process ("Killed process 1234 (python3)"). Local ranks are checked by the local
// transport, SSH ranks by their wrapper on the node (ssh/remote_command.cpp), Slurm tasks by
// their task wrapper (slurm/slurm_step.cpp); all write the same line into the rank's log.
// slurmstepd's own line ("Some of the step tasks have been OOM Killed", where Slurm enforces
// memory limits) counts too. The failure report and the restart verdict read those lines.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/exit_status.h"

namespace dtrain {

// templates/oom_kill_line.sh: the shell functions dtrain_oom_kills and dtrain_oom_line, which the
// SSH and Slurm wrappers put in front of their own script.
std::string_view OomKillLineScript();

// What every OOM line dtrain writes holds.
constexpr const char* kOomKillMarker = "the kernel's OOM killer";

// `oom_kill` of /proc/vmstat's text; -1 when absent.
int64_t OomKillCount(const std::string& vmstat);
// This machine's count now; -1 when unknown.
int64_t ReadOomKillCount();
// The kernel log's last line that says it killed `pid` (any process when `pid` <= 0), from its
// "Killed process 1234 (python3)" on; "" when there is none or the log is not readable.
std::string KernelLogOomKill(const std::string& kernel_log, pid_t pid);
std::string ReadKernelLogOomKill(pid_t pid);
// The line written into the rank's log: "dtrain: NODE: the kernel's OOM killer ran while this
// rank did (oom_kill 3 -> 4 in /proc/vmstat); kernel log: Killed process 1234 (python3) ...".
// `kernel_line` as KernelLogOomKill gives it; `its_pid`: whether it was looked up by the rank's
// pid (else it is the log's last OOM kill, and the line says so).
std::string OomKillLine(const std::string& node, int64_t before, int64_t after,
                        const std::string& kernel_line, bool its_pid);

// True when `text` (a rank's last log lines) holds dtrain's OOM line or slurmstepd's.
bool SaysOomKilled(const std::string& text);

// A rank that ended by SIGKILL (or exit 137, as a shell reports it) and whose `text` says the
// OOM killer did it (SaysOomKilled).
bool KilledByOomKiller(const ExitStatus& status, const std::string& text);

// The note for the failure report ("dtrain: note: ...\n"), or "" unless KilledByOomKiller with
// the tail's lines.
std::string OomKillNote(const ExitStatus& status, const std::vector<std::string>& tail);

}  // namespace dtrain
