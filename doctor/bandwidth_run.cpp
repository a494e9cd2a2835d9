#include "doctor/bandwidth_run.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "doctor/check_support.h"
#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/launch.h"
#include "launcher/rank_log.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using checks::Make;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// What a failed rank said: its last "error:" line (dtrain-clip's own, before any C++ stack the
// exception carried), else its last line.
std::string WhyItFailed(const std::string& text) {
  std::string last, error;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line.rfind("frame #", 0) == 0) continue;
    last = line;
    if (line.find("error:") != std::string::npos) error = line;
  }
  return error.empty() ? last : error;
}

}  // namespace

BandwidthResult RunBandwidthTest(const ClusterSpec& probed, const BandwidthOptions& options) {
  BandwidthResult result;
  std::string log_dir = options.log_dir;
  bool temporary = false;
  if (log_dir.empty()) {
    char pattern[] = "/tmp/dtrain-bandwidth-XXXXXX";
    if (!mkdtemp(pattern)) throw Error("cannot make a temporary folder for the bandwidth test");
    log_dir = pattern;
    temporary = true;
  }
  LaunchOptions launch;
  launch.cluster = options.cluster;
  if (launch.cluster.nproc_per_node == 0 && !GpusExpected(probed))
    launch.cluster.nproc_per_node = 1;
  launch.job_name = "doctor-bandwidth-" + NewJobName();
  launch.log_dir = log_dir;
  launch.max_restarts = 0;
  launch.quiet = true;
  launch.console = ConsoleStreams::kNone;
  launch.stall_timeout_s = 0;
  launch.grace_period_s = 3;
  launch.command = {"dtrain-clip",  "bandwidth",
                    "--size-mib",   std::to_string(options.size_mib),
                    "--iterations", std::to_string(options.iterations)};
  result.launch_status = RunLaunch(launch);
  result.job_dir = log_dir + "/" + launch.job_name;

  JobSummary job = ReadJobSummary(result.job_dir);
  std::map<int, std::string> node_hosts;
  for (const auto& [rank, host] : job.rank_hosts) {
    const std::string text = ReadFile(RankLogPath(result.job_dir, rank));
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

  if (result.launch_status != 0) {
    // Which rank failed, on which node, and the end of what it printed.
    std::string why =
        fmt::format("the bandwidth test stopped with status {}", result.launch_status);
    std::vector<std::string> nodes;
    if (job.failed_rank >= 0) {
      const std::string host = job.rank_hosts.count(job.failed_rank)
                                   ? job.rank_hosts.at(job.failed_rank)
                                   : std::string("?");
      nodes.push_back(host);
      const std::string tail = WhyItFailed(ReadFile(RankLogPath(result.job_dir, job.failed_rank)));
      why = fmt::format(
          "the bandwidth test could not run on node {} (rank {}, {}){}", host, job.failed_rank,
          job.rank_exits.count(job.failed_rank) ? job.rank_exits.at(job.failed_rank) : "failed",
          tail.empty() ? "" : ": " + tail);
    }
    result.verdict.findings.push_back(Make(
        Severity::kError, "bandwidth", "", nodes, why,
        fmt::format("`dtrain doctor` (without --bandwidth) says whether dtrain-clip runs there; "
                    "every rank's output is in {}",
                    result.job_dir)));
  } else if (temporary) {
    std::error_code ec;
    fs::remove_all(log_dir, ec);
    result.job_dir.clear();
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
