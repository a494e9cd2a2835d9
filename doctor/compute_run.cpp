#include "doctor/compute_run.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "doctor/check_support.h"
#include "doctor/doctor_job.h"
#include "launcher/shell_quote.h"
#include "launcher/ssh/remote_command.h"

namespace dtrain {

std::map<std::string, std::string> GpuModels(const ProbeRun& run) {
  std::map<std::string, std::string> models;
  for (const NodeFacts& node : run.nodes) {
    if (node.gpus.empty()) continue;
    const std::string& first = node.gpus.front().name;
    bool one_model = !first.empty();
    for (const GpuInfo& gpu : node.gpus) one_model = one_model && gpu.name == first;
    if (one_model) models[node.host] = first;
  }
  return models;
}

ComputeResult RunComputeCheck(const ClusterSpec& probed, const ComputeOptions& options) {
  // The rank always ends with status 0 and says the check's own in its last line, so that one
  // device's failure does not stop the others' checks (a failed rank ends the job). dtrain-clip
  // is looked for as launch looks for it when it is a rank's program.
  const std::string dir = DtrainDirectory();
  // Where GPUs are expected a rank must use its GPU, so that a node whose GPUs are not visible
  // cannot pass on its CPU.
  const std::string device = GpusExpected(probed) ? "cuda" : "auto";
  const std::string script = fmt::format(
      "{}\n"
      "if clip=$(dtrain_program dtrain-clip {}); then\n"
      "  timeout -k 5 {:g} \"$clip\" check --device {}; echo \"{}$?\"\n"
      "else\n"
      "  echo {}; echo \"{}127\"\n"
      "fi\n",
      DtrainProgramLookup(), ShellQuote(dir), options.timeout_s, device, kCheckExitMarker,
      ShellQuote("error: no dtrain-clip beside dtrain (" + dir +
                 "), on PATH, in /usr/local/bin, /usr/bin or ~/.local/bin"),
      kCheckExitMarker);
  DoctorJob job =
      RunDoctorJob(probed, options.cluster, "compute", {"sh", "-c", script}, options.log_dir);
  ComputeResult result;
  result.launch_status = job.launch_status;
  result.job_dir = job.job_dir;
  for (const auto& [rank, node] : job.summary.rank_hosts) {
    RankComputeCheck r = ParseComputeCheckLog(DoctorRankLog(job, rank));
    r.rank = rank;
    r.node = node;
    if (r.device.rfind("cuda", 0) == 0 && r.model.empty()) {  // a check older than the model line
      if (auto model = options.gpu_models.find(node); model != options.gpu_models.end()) {
        r.model = model->second;
      }
    }
    result.ranks.push_back(std::move(r));
  }
  result.findings = JudgeComputeChecks(result.ranks, options.timeout_s, result.job_dir);
  if (result.ranks.empty()) {
    result.findings.push_back(checks::Make(
        Severity::kError, "compute", "", {},
        fmt::format("the compute check started on no node (dtrain launch exited with status {}){}",
                    result.launch_status, job.launch_error.empty() ? "" : ": " + job.launch_error),
        "fix what the findings above name (a node that cannot be reached stops the whole test "
        "job), or leave that node out of the cluster file for the test"));
  }
  if (result.launch_status == 0 && WorstSeverity(result.findings) != Severity::kError) {
    RemoveTemporaryDoctorJob(job);
    result.job_dir = job.job_dir;
  }
  return result;
}

std::string AddComputeJson(const std::string& report_json, const ComputeResult& result) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankComputeCheck& r : result.ranks) {
    nlohmann::json checks = nlohmann::json::array();
    for (const DeviceCheckLine& c : r.checks) {
      checks.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
    }
    nlohmann::json speeds = nlohmann::json::array();
    for (const DeviceSpeedLine& s : r.speeds) {
      speeds.push_back(
          {{"name", s.name}, {"value", s.value}, {"unit", s.unit}, {"detail", s.detail}});
    }
    ranks.push_back({{"rank", r.rank},
                     {"node", r.node},
                     {"device", r.device},
                     {"model", r.model},
                     {"exit_status", r.exit_status},
                     {"passed", RankPassed(r)},
                     {"checks", checks},
                     {"speeds", speeds}});
  }
  nlohmann::json report = nlohmann::json::parse(report_json);
  report["compute"] = {
      {"launch_status", result.launch_status},
      {"job_dir", result.job_dir.empty() ? nlohmann::json() : nlohmann::json(result.job_dir)},
      {"ranks", ranks}};
  return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace dtrain
