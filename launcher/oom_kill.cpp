#include "launcher/oom_kill.h"

#include <sys/klog.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace dtrain {

int64_t OomKillCount(const std::string& vmstat) {
  std::istringstream in(vmstat);
  std::string name;
  long long value = 0;
  while (in >> name >> value) {
    if (name == "oom_kill") return value;
  }
  return -1;
}

int64_t ReadOomKillCount() {
  std::ifstream in("/proc/vmstat");
  if (!in) return -1;
  return OomKillCount(std::string(std::istreambuf_iterator<char>(in), {}));
}

std::string KernelLogOomKill(const std::string& kernel_log, pid_t pid) {
  const std::string needle =
      pid > 0 ? fmt::format("Killed process {} ", pid) : std::string("Killed process ");
  const size_t at = kernel_log.rfind(needle);
  if (at == std::string::npos) return "";
  const size_t end = kernel_log.find('\n', at);
  return kernel_log.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::string ReadKernelLogOomKill(pid_t pid) {
  // SYSLOG_ACTION_SIZE_BUFFER, then SYSLOG_ACTION_READ_ALL: needs CAP_SYSLOG where
  // kernel.dmesg_restrict is set; without it there is no name, only the count.
  const int size = ::klogctl(10, nullptr, 0);
  if (size <= 0) return "";
  std::string log(static_cast<size_t>(size), '\0');
  const int n = ::klogctl(3, log.data(), size);
  if (n <= 0) return "";
  log.resize(static_cast<size_t>(n));
  return KernelLogOomKill(log, pid);
}

std::string OomKillLine(const std::string& node, int64_t before, int64_t after,
                        const std::string& kernel_line, bool its_pid) {
  std::string line = fmt::format(
      "dtrain: {}: {} ran while this rank did (oom_kill {} -> {} in "
      "/proc/vmstat)",
      node, kOomKillMarker, before, after);
  if (!kernel_line.empty()) {
    line += (its_pid ? "; kernel log: " : "; the kernel log's last OOM kill: ") + kernel_line;
  }
  return line + "\n";
}

bool SaysOomKilled(const std::string& text) {
  return text.find(kOomKillMarker) != std::string::npos ||
         text.find("have been OOM Killed") != std::string::npos ||  // slurmstepd
         text.find("oom_kill event") != std::string::npos ||
         text.find("oom-kill event") != std::string::npos;
}

bool KilledByOomKiller(const ExitStatus& status, const std::string& text) {
  return (status.signal == SIGKILL || status.code == 128 + SIGKILL) && SaysOomKilled(text);
}

std::string OomKillNote(const ExitStatus& status, const std::vector<std::string>& tail) {
  std::string text;
  for (const std::string& line : tail) text += line + "\n";
  if (!KilledByOomKiller(status, text)) return "";
  return "dtrain: note: the kernel's OOM killer ended this rank: its node ran out of host memory "
         "(or the rank's memory cgroup hit its limit). Fewer data-loader workers or ranks per "
         "node, a smaller batch, or nodes with more memory; restarting alone will meet the same "
         "limit\n";
}

}  // namespace dtrain
