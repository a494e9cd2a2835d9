// The allocation: adopted from SLURM_JOB_ID, or a batch job submitted with sbatch and followed
// with squeue until it runs; node addresses from scontrol.
#include "launcher/slurm/slurm_allocation.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/exit_status.h"
#include "launcher/slurm/slurm_batch.h"
#include "launcher/slurm/slurm_child.h"
#include "launcher/slurm/slurm_hostlist.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kClientTimeoutMs = 30000;

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The value of `key` ("NodeAddr=") in one line of `scontrol show node -o`; "" when absent.
std::string Field(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return line.substr(start, line.find_first_of(" \n", start) - start);
}

// How each node is reached (slurm.conf's NodeAddr, which defaults to its name).
std::vector<std::string> NodeAddresses(const std::vector<std::string>& hosts) {
  const SlurmCommandResult shown =
      RunSlurmCommand({"scontrol", "show", "node", "-o"}, "", kClientTimeoutMs);
  std::map<std::string, std::string> address_of;
  std::istringstream lines(shown.status == 0 ? shown.out : "");
  for (std::string line; std::getline(lines, line);) {
    const std::string address = Field(line, "NodeAddr=");
    if (!address.empty()) address_of[Field(line, "NodeName=")] = address;
  }
  std::vector<std::string> addresses;
  for (const std::string& host : hosts) {
    const auto found = address_of.find(host);
    addresses.push_back(found == address_of.end() ? host : found->second);
  }
  return addresses;
}

volatile sig_atomic_t g_wait_interrupt = 0;
void OnWaitInterrupt(int sig) {
  g_wait_interrupt = sig;
}

// Ctrl-C (and SIGTERM, SIGHUP) only sets a flag while dtrain waits for nodes.
class WaitInterrupts {
 public:
  WaitInterrupts() {
    g_wait_interrupt = 0;
    struct sigaction action {};
    action.sa_handler = OnWaitInterrupt;
    for (size_t i = 0; i < 3; ++i) ::sigaction(kSignals[i], &action, &old_[i]);
  }
  ~WaitInterrupts() {
    for (size_t i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3]{};
};

}  // namespace

SlurmAllocation::~SlurmAllocation() {
  Withdraw();
}

void SlurmAllocation::Request(const ClusterSpec& spec, const SlurmJobIdentity& job) {
  job_ = job;
  const std::string inside = Getenv("SLURM_JOB_ID");
  if (!inside.empty()) {
    std::string nodelist = Getenv("SLURM_JOB_NODELIST");
    if (nodelist.empty()) nodelist = Getenv("SLURM_NODELIST");
    hosts_ = PreferOthers(ExpandHostlist(nodelist), job.avoid);
    if (hosts_.empty()) {
      throw Error(
          "SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: run dtrain inside salloc "
          "or sbatch, or unset SLURM_JOB_ID to submit a batch job");
    }
    ready_ = true;
    return;
  }
  int tasks_per_node = 0;
  for (const NodeSpec& node : spec.nodes) tasks_per_node = std::max(tasks_per_node, node.slots);
  const int nodes = static_cast<int>(spec.nodes.size());
  std::string script = RenderSbatchScript(spec.slurm, job.name, nodes, tasks_per_node);
  SlurmCommandResult submitted;
  bool submit_as_it_is = true;
  std::vector<std::string> avoid;
  if (!job.avoid.empty()) {
    // A node of an old record that Slurm no longer has would make sbatch refuse the exclusion
    // whole ("Invalid node name specified"): only the nodes sinfo lists are left out.
    const SlurmCommandResult listed =
        RunSlurmCommand({"sinfo", "-h", "-N", "-o", "%N"}, "", kClientTimeoutMs);
    avoid = NodesSlurmHas(job.avoid, listed.status == 0 ? listed.out : "");
    for (const std::string& machine : job.avoid) {
      if (std::find(avoid.begin(), avoid.end(), machine) == avoid.end()) {
        not_in_slurm_.push_back(machine);
      }
    }
  }
  if (!avoid.empty()) {
    // Leaving the nodes out is advice: a partition with too few others refuses the job at once
    // (sbatch: "Requested node configuration is not available"), and it goes in as it is. An
    // sbatch that did not answer may have submitted it: that is an error, not a refusal.
    const std::string excluding =
        RenderSbatchScript(Excluding(spec.slurm, avoid), job.name, nodes, tasks_per_node);
    submitted = RunSlurmCommand({"sbatch", "--parsable"}, excluding, kClientTimeoutMs);
    excluded_ = submitted.status == 0;
    submit_as_it_is = submitted.status > 0;
    if (!submit_as_it_is) script = excluding;
  }
  if (submit_as_it_is) {
    submitted = RunSlurmCommand({"sbatch", "--parsable"}, script, kClientTimeoutMs);
  }
  if (!job.record_dir.empty()) std::ofstream(job.record_dir + "/sbatch.sh") << script;
  if (submitted.status != 0) {
    throw Error("sbatch could not submit the job: " + submitted.Describe());
  }
  job_id_ = Trim(submitted.out.substr(0, submitted.out.find(';')));
  own_job_ = true;
  std::fprintf(stderr, "dtrain: submitted Slurm batch job %s (%s); waiting for it to start\n",
               job_id_.c_str(), job.name.c_str());
}

bool SlurmAllocation::Ready() {
  if (ready_ || Clock::now() < next_check_) return ready_;
  next_check_ = Clock::now() + std::chrono::milliseconds(500);
  const SlurmCommandResult answer =
      RunSlurmCommand({"squeue", "-h", "-j", job_id_, "-o", "%T|%N|%r"}, "", kClientTimeoutMs);
  if (answer.status != 0 && answer.err.find("Invalid job id") == std::string::npos) {
    throw Error("squeue failed: " + answer.Describe());
  }
  const SlurmJobState job = ParseSqueueLine(answer.out);
  if (job.state == "RUNNING" && !job.nodelist.empty()) {
    hosts_ = ExpandHostlist(job.nodelist);
    ready_ = true;
  } else if (IsFinishedJobState(job.state)) {
    throw Error(fmt::format("Slurm job {} ended before it started ({}{})", job_id_,
                            job.state.empty() ? "no longer known to squeue" : job.state,
                            job.reason.empty() ? "" : ": " + job.reason));
  } else if (job.reason != last_reason_ && job.reason != "None") {
    last_reason_ = job.reason;
    std::fprintf(stderr, "dtrain: Slurm job %s is %s (%s)\n", job_id_.c_str(), job.state.c_str(),
                 job.reason.c_str());
  }
  return ready_;
}

void SlurmAllocation::Withdraw() {
  if (own_job_ && !job_id_.empty()) {
    RunSlurmCommand({"scancel", "--quiet", job_id_}, "", kClientTimeoutMs);
  }
  own_job_ = false;
}

ClusterSpec SlurmAllocation::Place(const ClusterSpec& spec) const {
  return PlaceOnNodes(spec, hosts_, NodeAddresses(hosts_), job_id_, job_.name);
}

std::vector<std::string> PreferOthers(std::vector<std::string> hosts,
                                      const std::vector<std::string>& avoid) {
  std::stable_partition(hosts.begin(), hosts.end(), [&](const std::string& host) {
    return std::find(avoid.begin(), avoid.end(), host) == avoid.end();
  });
  return hosts;
}

std::vector<std::string> NodesSlurmHas(const std::vector<std::string>& machines,
                                       const std::string& listed) {
  std::istringstream lines(listed);
  std::set<std::string> names;
  for (std::string line; std::getline(lines, line);) {
    if (!Trim(line).empty()) names.insert(Trim(line));
  }
  if (names.empty()) return machines;
  std::vector<std::string> has;
  for (const std::string& machine : machines) {
    if (names.count(machine)) has.push_back(machine);
  }
  return has;
}

SlurmSpec Excluding(SlurmSpec slurm, const std::vector<std::string>& machines) {
  std::string& exclude = slurm.extra["exclude"];
  for (const std::string& machine : machines) exclude += (exclude.empty() ? "" : ",") + machine;
  return slurm;
}

ClusterSpec PlaceOnNodes(const ClusterSpec& spec, const std::vector<std::string>& hosts,
                         const std::vector<std::string>& addresses, const std::string& job_id,
                         const std::string& job_name) {
  if (hosts.size() < spec.nodes.size()) {
    throw Error(fmt::format("the Slurm allocation has {} node(s) ({}); the job needs {}",
                            hosts.size(), fmt::join(hosts, ","), spec.nodes.size()));
  }
  ClusterSpec placed = spec;
  for (size_t i = 0; i < placed.nodes.size(); ++i) {
    placed.nodes[i].machine = hosts[i];
    placed.nodes[i].address = i < addresses.size() ? addresses[i] : hosts[i];
  }
  placed.slurm_placement = {true, job_id, job_name};
  return placed;
}

ClusterSpec PlaceOnSlurm(const ClusterSpec& spec, const SlurmJobIdentity& job,
                         SlurmAllocation& allocation) {
  if (spec.transport != TransportKind::kSlurm) return spec;
  WaitInterrupts interrupts;
  allocation.Request(spec, job);
  while (!allocation.Ready()) {
    if (g_wait_interrupt != 0) {
      allocation.Withdraw();
      throw Error(
          fmt::format("interrupted by {} while Slurm job {} waited for nodes; it was withdrawn",
                      SignalName(g_wait_interrupt), allocation.job_id()),
          128 + g_wait_interrupt);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return allocation.Place(spec);
}

}  // namespace dtrain
