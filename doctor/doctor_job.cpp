#include "doctor/doctor_job.h"

#include <stdlib.h>
#include <unistd.h>

#include <climits>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "doctor/checks.h"
#include "launcher/error.h"
#include "launcher/launch.h"
#include "launcher/rank_log.h"

namespace dtrain {

DoctorJob RunDoctorJob(const ClusterSpec& probed, const ClusterChoice& cluster,
                       const std::string& kind, const std::vector<std::string>& command,
                       const std::string& log_dir) {
  DoctorJob job;
  job.log_dir = log_dir;
  if (job.log_dir.empty()) {
    std::string pattern = "/tmp/dtrain-" + kind + "-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      throw Error("cannot make a temporary folder for the doctor's " + kind + " test");
    }
    job.log_dir = pattern;
    job.temporary = true;
  }
  LaunchOptions launch;
  launch.cluster = cluster;
  if (launch.cluster.nproc_per_node == 0 && !GpusExpected(probed)) {
    launch.cluster.nproc_per_node = 1;
  }
  launch.job_name = "doctor-" + kind + "-" + NewJobName();
  launch.log_dir = job.log_dir;
  launch.max_restarts = 0;
  launch.quiet = true;
  launch.console.streams = ConsoleStreams::kNone;
  launch.stall_timeout_s = 0;
  launch.grace_period_s = 3;
  launch.command = command;
  try {
    job.launch_status = RunLaunch(launch);
  } catch (const Error& e) {
    // Refused before any rank started (a node that does not take the login, say): the doctor
    // still reports, with this as the test's finding.
    job.launch_status = 1;
    for (const char* c = e.what(); *c; ++c) {  // one line: "...on any node: node node2 ..."
      const bool space = *c == '\n' || *c == ' ';
      if (space && (job.launch_error.empty() || job.launch_error.back() == ' ')) continue;
      job.launch_error += space ? ' ' : *c;
    }
    while (!job.launch_error.empty() && job.launch_error.back() == ' ') job.launch_error.pop_back();
  }
  job.job_dir = job.log_dir + "/" + launch.job_name;
  try {
    job.summary = ReadJobSummary(job.job_dir);
  } catch (const Error&) {
    // The launch stopped before it wrote job.json (a node that refused the login, say): no rank
    // ran, and launch_status says so; the probe's findings say why.
  }
  return job;
}

std::string DoctorRankLog(const DoctorJob& job, int rank) {
  std::ifstream in(RankLogPath(job.job_dir, rank), std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void RemoveTemporaryDoctorJob(DoctorJob& job) {
  if (!job.temporary) return;
  std::error_code ec;
  std::filesystem::remove_all(job.log_dir, ec);
  job.job_dir.clear();
}

std::string DtrainDirectory() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string WhyRankFailed(const std::string& log) {
  std::string last, error;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line.rfind("frame #", 0) == 0) continue;
    last = line;
    if (line.find("error:") != std::string::npos) error = line;
  }
  return error.empty() ? last : error;
}

}  // namespace dtrain
