// Renders the holding batch script; reads squeue's answer.
#include "launcher/slurm/slurm_batch.h"

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

void ReplaceAll(std::string& text, const std::string& what, const std::string& with) {
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + with.size())) {
    text.replace(at, what.size(), with);
  }
}

// A value that must stay on its directive's line.
const std::string& OneLine(const std::string& key, const std::string& value) {
  if (value.find_first_of("\r\n") != std::string::npos) {
    throw Error(fmt::format("slurm.{}: the value holds a line break", key));
  }
  return value;
}

std::string Directive(const std::string& key, const std::string& value) {
  return fmt::format("#SBATCH --{}={}\n", key, OneLine(key, value));
}

}  // namespace

std::string RenderSbatchScript(const SlurmSpec& slurm, const std::string& job_name, int nodes,
                               int tasks_per_node) {
  std::string options;
  if (!slurm.partition.empty()) options += Directive("partition", slurm.partition);
  if (!slurm.time.empty()) options += Directive("time", slurm.time);
  if (!slurm.account.empty()) options += Directive("account", slurm.account);
  for (const auto& [key, value] : slurm.extra) options += Directive(key, value);
  if (!options.empty()) options.pop_back();
  std::string script(SbatchTemplate());
  ReplaceAll(script, "{{JOB_NAME}}", OneLine("job-name", job_name));
  ReplaceAll(script, "{{NODES}}", std::to_string(nodes));
  ReplaceAll(script, "{{TASKS_PER_NODE}}", std::to_string(tasks_per_node));
  ReplaceAll(script, "{{OPTIONS}}", options);
  return script;
}

SlurmJobState ParseSqueueLine(const std::string& text) {
  SlurmJobState job;
  std::string line = text.substr(0, text.find('\n'));
  const size_t a = line.find('|');
  job.state = line.substr(0, a);
  if (a == std::string::npos) return job;
  const size_t b = line.find('|', a + 1);
  job.nodelist = line.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  if (b != std::string::npos) job.reason = line.substr(b + 1);
  if (job.nodelist == "(null)") job.nodelist.clear();
  return job;
}

bool IsFinishedJobState(const std::string& state) {
  return state.empty() || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
         state == "COMPLETED" || state == "NODE_FAIL" || state == "BOOT_FAIL" ||
         state == "DEADLINE" || state == "OUT_OF_MEMORY" || state == "PREEMPTED";
}

}  // namespace dtrain
