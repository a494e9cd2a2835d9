#include "doctor/bandwidth_run.h"

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "doctor/check_support.h"
#include "doctor/doctor_job.h"
#include "doctor/fast_health_check.h"
#include "doctor/link_errors.h"

namespace dtrain {

using checks::Make;

BandwidthResult RunBandwidthTest(const ClusterSpec& probed, const BandwidthOptions& options) {
  BandwidthResult result;
  // Each node's link error counters before and after the test, which loads the links. A link
  // that retrains or goes down under the test is an error: --exclude-bad leaves its node out.
  LinkErrorWatch links(Severity::kError);
  links.Update(ProbeHealthParts(probed, kFastHealthCheckTimeoutS, options.cancelled).nodes);
  if (options.cancelled && options.cancelled()) return result;  // no test job to start
  DoctorJob job =
      RunDoctorJob(probed, options.cluster, "bandwidth",
                   {"dtrain-clip", "bandwidth", "--size-mib", std::to_string(options.size_mib),
                    "--iterations", std::to_string(options.iterations)},
                   options.log_dir);
  result.launch_status = job.launch_status;
  result.job_dir = job.job_dir;

  std::map<int, std::string> node_hosts;
  for (const auto& [rank, host] : job.summary.rank_hosts) {
    const std::string text = DoctorRankLog(job, rank);
    // "dtrain-bandwidth-rank {...,"node":N,...}": which node index this rank is on.
    size_t at = text.find("dtrain-bandwidth-rank ");
    if (at != std::string::npos) {
      try {
        auto line = text.substr(at + 22, text.find('\n', at) - at - 22);
        node_hosts[nlohmann::json::parse(line).at("node").get<int>()] = host;
      } catch (const std::exception&) {
      }
    }
    for (BandwidthFigure& f : ParseBandwidthLines(text)) result.figures.push_back(std::move(f));
  }
  for (const auto& [node, host] : node_hosts) {
    if (node >= static_cast<int>(result.hosts.size())) result.hosts.resize(node + 1);
    result.hosts[node] = host;
  }
  result.verdict = JudgeBandwidth(result.figures, result.hosts);
  for (Finding& f :
       links.Update(ProbeHealthParts(probed, kFastHealthCheckTimeoutS, options.cancelled).nodes)) {
    result.verdict.findings.push_back(std::move(f));
  }

  if (result.launch_status != 0) {
    // Which rank failed, on which node, and the end of what it printed.
    const JobSummary& summary = job.summary;
    std::string why =
        fmt::format("the bandwidth test stopped with status {}{}", result.launch_status,
                    job.launch_error.empty() ? "" : ": " + job.launch_error);
    std::vector<std::string> nodes;
    if (summary.failed_rank >= 0) {
      const std::string host = summary.rank_hosts.count(summary.failed_rank)
                                   ? summary.rank_hosts.at(summary.failed_rank)
                                   : std::string("?");
      nodes.push_back(host);
      const std::string tail = WhyRankFailed(DoctorRankLog(job, summary.failed_rank));
      why = fmt::format(
          "the bandwidth test could not run on node {} (rank {}, {}){}", host, summary.failed_rank,
          summary.rank_exits.count(summary.failed_rank) ? summary.rank_exits.at(summary.failed_rank)
                                                        : "failed",
          tail.empty() ? "" : ": " + tail);
    }
    result.verdict.findings.push_back(Make(
        Severity::kError, "bandwidth", "", nodes, why,
        fmt::format("`dtrain doctor` (without --bandwidth) says whether dtrain-clip runs there; "
                    "every rank's output is in {}",
                    result.job_dir)));
  } else {
    RemoveTemporaryDoctorJob(job);
    result.job_dir = job.job_dir;
  }
  return result;
}

std::string AddBandwidthJson(const std::string& report_json, const BandwidthResult& result) {
  nlohmann::json figures = nlohmann::json::array();
  for (const BandwidthFigure& f : result.figures) {
    nlohmann::json names = nlohmann::json::array();
    for (int n : f.nodes) {
      names.push_back(n < static_cast<int>(result.hosts.size()) ? result.hosts[n] : "");
    }
    figures.push_back({{"kind", f.kind},
                       {"nodes", names},
                       {"ranks", f.ranks},
                       {"backend", f.backend},
                       {"bytes", f.bytes},
                       {"seconds", f.seconds},
                       {"busbw_gbs", f.busbw_gbs}});
  }
  auto names = [&](const std::vector<int>& nodes) {
    nlohmann::json out = nlohmann::json::array();
    for (int n : nodes)
      out.push_back(n < static_cast<int>(result.hosts.size()) ? result.hosts[n] : "");
    return out;
  };
  nlohmann::json links = nlohmann::json::array();
  for (const auto& [a, b] : result.verdict.slow_links) links.push_back(names({a, b}));
  nlohmann::json doc = {
      {"launch_status", result.launch_status},
      {"job_dir", result.job_dir.empty() ? nlohmann::json() : nlohmann::json(result.job_dir)},
      {"reference_busbw_gbs", result.verdict.reference_gbs},
      {"slow_nodes", names(result.verdict.slow_nodes)},
      {"slow_links", links},
      {"slow_inside_nodes", names(result.verdict.slow_inside)},
      {"figures", figures}};
  nlohmann::json report = nlohmann::json::parse(report_json);
  report["bandwidth"] = doc;
  return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace dtrain
