// Earlier jobs' quarantines, read back from the log dir (node_history.h).
#include "launcher/node_history.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "launcher/age_text.h"
#include "launcher/job_record.h"
#include "launcher/rank_log.h"

namespace dtrain {
namespace {

// The whole file ("" when it cannot be read).
std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every quarantine of each node into `out`, by its name or (`by_machine`) by the Slurm node it
// ran on, from the records in `log_dir` written since `since_us` (RecentQuarantines).
void ReadQuarantinesInto(std::map<std::string, std::vector<PastQuarantine>>& out,
                         const std::string& log_dir, int64_t since_us, bool by_machine) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "latest" || entry.is_symlink(ec) || !entry.is_directory(ec)) continue;
    // A record not written since `since_us` is older than any quarantine that counts: not read.
    struct stat st;
    const std::string path = JobRecordPath(entry.path().string());
    if (::stat(path.c_str(), &st) != 0) continue;
    const int64_t written_us = int64_t{st.st_mtim.tv_sec} * 1000000 + st.st_mtim.tv_nsec / 1000;
    if (written_us < since_us) continue;
    // Most jobs quarantine nothing: their record is not parsed.
    const std::string text = FileText(path);
    if (text.find("\"quarantined\"") == std::string::npos) continue;
    JobSummary job;
    try {
      job = ParseJobSummary(text, path);
    } catch (const std::exception&) {
      continue;
    }
    // A Slurm job's node name labels a placement: its machine is what was quarantined.
    if (by_machine != (job.transport == "slurm")) continue;
    const int64_t when_us = job.ended_us > 0 ? job.ended_us : written_us;
    if (when_us < since_us) continue;
    for (const auto& [host, why] : job.quarantined) {
      std::string key = host;
      if (by_machine) {
        const auto machine = job.node_machines.find(host);
        if (machine == job.node_machines.end()) continue;
        key = machine->second;
      }
      PastQuarantine past;
      past.job = job.name;
      past.why = why;
      past.when_us = when_us;
      out[key].push_back(std::move(past));
    }
  }
}

// RecentQuarantines, by node name or by Slurm node.
std::map<std::string, PastQuarantine> ReadRecentQuarantines(const std::string& log_dir,
                                                            double within_s, int64_t now_us,
                                                            bool by_machine) {
  std::map<std::string, PastQuarantine> out;
  if (within_s <= 0) return out;
  // Read back kHoldBackGrowth windows, the longest a node is held back; a window longer than the
  // clock's age (--hold-back 1e30) reaches back to the epoch.
  const double look_back_us =
      std::min(within_s * 1e6 * kHoldBackGrowth, static_cast<double>(now_us));
  const int64_t since_us = now_us - static_cast<int64_t>(look_back_us);
  // History is advice: a log dir that cannot be listed to the end (a folder removed meanwhile)
  // gives what was read so far, and never stops a launch.
  std::map<std::string, std::vector<PastQuarantine>> all;
  try {
    ReadQuarantinesInto(all, log_dir, since_us, by_machine);
  } catch (const std::exception&) {
  }
  for (auto& [key, list] : all) {
    PastQuarantine newest = *std::max_element(
        list.begin(), list.end(),
        [](const PastQuarantine& a, const PastQuarantine& b) { return a.when_us < b.when_us; });
    newest.jobs = static_cast<int>(list.size());
    newest.window_s = within_s;
    newest.held_s = GrownHoldBack(within_s, newest.jobs);
    if (static_cast<double>(now_us - newest.when_us) <= newest.held_s * 1e6) out[key] = newest;
  }
  return out;
}

}  // namespace

// "1st", "2nd", "3rd", "4th", "11th", "22nd".
std::string Ordinal(int n) {
  const int tens = n % 100, ones = n % 10;
  const char* suffix = tens >= 11 && tens <= 13 ? "th"
                       : ones == 1              ? "st"
                       : ones == 2              ? "nd"
                       : ones == 3              ? "rd"
                                                : "th";
  return fmt::format("{}{}", n, suffix);
}

std::map<std::string, PastQuarantine> RecentQuarantines(const std::string& log_dir, double within_s,
                                                        int64_t now_us) {
  return ReadRecentQuarantines(log_dir, within_s, now_us, /*by_machine=*/false);
}

std::map<std::string, PastQuarantine> RecentlyQuarantinedSlurmNodes(const std::string& log_dir,
                                                                    double within_s,
                                                                    int64_t now_us) {
  return ReadRecentQuarantines(log_dir, within_s, now_us, /*by_machine=*/true);
}

std::vector<HeldBack> HoldBackRecentlyQuarantined(
    std::vector<NodeSpec>& nodes, const std::map<std::string, PastQuarantine>& recent) {
  std::vector<HeldBack> held;
  for (NodeSpec& node : nodes) {
    auto past = recent.find(node.host);
    if (node.spare || past == recent.end()) continue;
    HeldBack h{node.host, "", past->second};
    for (NodeSpec& spare : nodes) {
      if (spare.spare && !spare.witness && !recent.count(spare.host)) {
        spare.spare = false;
        node.spare = true;
        h.spare = spare.host;
        break;
      }
    }
    held.push_back(h);
  }
  return held;
}

std::vector<std::string> HoldBackPlan::SlurmNodeNames() const {
  std::vector<std::string> names;
  for (const auto& [name, past] : slurm_nodes) names.push_back(name);
  return names;
}

HoldBackPlan PlanHoldBack(ClusterSpec& spec, const std::string& log_dir, double within_s,
                          int64_t now_us) {
  HoldBackPlan plan;
  if (spec.transport == TransportKind::kSsh) {
    plan.ssh_nodes =
        HoldBackRecentlyQuarantined(spec.nodes, RecentQuarantines(log_dir, within_s, now_us));
  } else if (spec.transport == TransportKind::kSlurm) {
    plan.slurm_nodes = RecentlyQuarantinedSlurmNodes(log_dir, within_s, now_us);
  }
  return plan;
}

std::string HoldBackSpan(double seconds) {
  if (seconds == kDefaultHoldBackS) return "a day";
  // Past int64 microseconds' range.
  if (seconds >= 9e12) return fmt::format("{:.0f} days", seconds / 86400);
  return AgeText(static_cast<int64_t>(seconds * 1e6) / 1000000);
}

double GrownHoldBack(double window_s, int jobs) {
  double held_s = window_s;
  for (int k = 1; k < jobs && held_s < window_s * kHoldBackGrowth; ++k) held_s *= 2;
  return std::min(held_s, window_s * kHoldBackGrowth);
}

std::string DescribePastQuarantine(const PastQuarantine& past, int64_t now_us) {
  std::string again;
  if (past.jobs > 1) {
    again = fmt::format(", the {} job to do so within {} (held back {}, not {})",
                        Ordinal(past.jobs), HoldBackSpan(past.window_s * kHoldBackGrowth),
                        HoldBackSpan(past.held_s), HoldBackSpan(past.window_s));
  }
  return fmt::format("job {} quarantined it {} ago{}: {}", past.job,
                     AgeText((now_us - past.when_us) / 1000000), again, past.why);
}

std::string DescribeHeldBack(const HeldBack& held, int64_t now_us) {
  const std::string past = DescribePastQuarantine(held.past, now_us);
  if (held.spare.empty()) {
    return fmt::format(
        "node {} runs though {}; no spare that no recent job quarantined can take "
        "its place",
        held.host, past);
  }
  return fmt::format("node {} held back as a spare ({} runs in its place): {}", held.host,
                     held.spare, past);
}

std::string DescribeSlurmHoldBack(const std::string& machine, const PastQuarantine& past, bool used,
                                  bool excluded, bool in_allocation, int64_t now_us) {
  const std::string quarantined = DescribePastQuarantine(past, now_us);
  if (used) {
    return fmt::format("Slurm node {} runs in this job though {}; {}", machine, quarantined,
                       in_allocation ? "the allocation has no other node to take its place"
                                     : "Slurm refused the batch job without it");
  }
  if (excluded) {
    return fmt::format("Slurm node {} left out of this job (sbatch --exclude): {}", machine,
                       quarantined);
  }
  if (in_allocation) {
    return fmt::format("Slurm node {} of the allocation left unused: {}", machine, quarantined);
  }
  return "";
}

std::string DescribeSlurmNodeGone(const std::string& machine, const PastQuarantine& past,
                                  int64_t now_us) {
  return fmt::format(
      "Slurm node {} is not left out of this job: Slurm has no such node now "
      "(sinfo), though {}",
      machine, DescribePastQuarantine(past, now_us));
}

void SayHeldBack(const HoldBackPlan& plan, const ClusterSpec& placed,
                 const SlurmAllocation& allocation, JobRecord& record) {
  const int64_t now_us = WallMicros();
  std::vector<std::string> lines;
  for (const HeldBack& held : plan.ssh_nodes) lines.push_back(DescribeHeldBack(held, now_us));
  const std::vector<std::string>& hosts = allocation.hosts();
  const std::vector<std::string>& gone = allocation.not_in_slurm();
  for (const auto& [machine, past] : plan.slurm_nodes) {
    if (std::find(gone.begin(), gone.end(), machine) != gone.end()) {
      lines.push_back(DescribeSlurmNodeGone(machine, past, now_us));
      continue;
    }
    bool used = false;
    for (const NodeSpec& node : placed.nodes) used = used || node.machine == machine;
    const bool in_allocation = allocation.job_id().empty() &&
                               std::find(hosts.begin(), hosts.end(), machine) != hosts.end();
    lines.push_back(
        DescribeSlurmHoldBack(machine, past, used, allocation.excluded(), in_allocation, now_us));
  }
  for (const std::string& text : lines) {
    if (text.empty()) continue;
    std::fprintf(stderr, "dtrain: %s\n", text.c_str());
    record.events.push_back({now_us, "held_back", text, ""});
  }
}

}  // namespace dtrain
