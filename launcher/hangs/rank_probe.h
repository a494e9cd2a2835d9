// The rank probe: templates/rank_probe.sh run on every node of a job through the job's transport
// (one `sh -s` per node), and what it found: each rank's processes as the kernel sees them
// (state, CPU time, wchan), dtrain-clip's heartbeat file, and Python stacks from py-spy.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/transport.h"

namespace dtrain {

// One process of a rank on its node.
struct RankProcess {
  int pid = 0;
  int ppid = 0;
  char state = '?';  // R running, S sleeping, D disk wait, T stopped, Z zombie, ...
  std::string comm;
  std::string wchan;  // kernel function it sleeps in; "0" or "" when running or not shown
  std::string cmd;
  double cpu_s = 0;                                  // user + system
  std::vector<std::string> stack_lines;              // py-spy dump, as printed
  std::map<std::string, std::string> frame_sources;  // "file:line" -> that source line
  std::string stack_error;                           // why there is no stack
};

// What the probe found for one rank.
struct RankFacts {
  int rank = -1;
  std::string host;
  std::vector<RankProcess> processes;  // main() first
  double cpu_s = 0;                    // all its processes together
  // dtrain-clip's heartbeat (runtime/dist/heartbeat.h keys: step, activity, collective, ...) and
  // how long ago its file was written, on the node's clock.
  std::map<std::string, std::string> heartbeat;
  double heartbeat_age_s = -1;  // -1: no heartbeat file

  // The process that is the rank: not a shell or wrapper around it, the lowest pid otherwise.
  const RankProcess* main() const { return processes.empty() ? nullptr : &processes.front(); }
};

// A probe over all nodes: ranks found, nodes that did not answer.
struct ProbeResult {
  std::map<int, RankFacts> ranks;
  std::map<std::string, std::string> node_errors;  // host -> why it gave no answer
};

struct ProbeRequest {
  std::string job_name;  // ranks carry DTRAIN_JOB=<it>
  bool stacks = false;   // take Python stacks (py-spy) too
  std::string py_spy;    // a py-spy to try first ("" = beside the rank's python, PATH)
  // The job's folder as its ranks were told it (DTRAIN_LOG_DIR): with the name, it tells this
  // job's ranks from those of another job of the same name on the node. "" = the name alone.
  std::string job_dir;
};

// Runs the probe on every node of `spec` through a transport made for it, asynchronously: Start
// it, then Poll() from a loop; done() once every node answered or the deadline passed.
class RankProbe : public TransportEvents {
 public:
  RankProbe(const ClusterSpec& spec, ProbeRequest request, double deadline_s);
  ~RankProbe() override;
  void Start();
  // Moves the probe on for up to timeout_ms. Returns done().
  bool Poll(int timeout_ms);
  bool done() const { return done_; }
  // Valid once done().
  const ProbeResult& result() const { return result_; }
  // Start, Poll until done: for `dtrain status` and tests.
  static ProbeResult RunToEnd(const ClusterSpec& spec, ProbeRequest request, double deadline_s);

  void OnOutput(int id, OutputStream stream, std::string_view bytes) override;
  void OnExit(int id, const ExitStatus& status) override;

 private:
  void Finish();

  const ClusterSpec& spec_;
  ProbeRequest request_;
  double deadline_s_;
  std::unique_ptr<Transport> transport_;
  std::map<int, std::string> output_;  // node index -> stdout
  std::map<int, ExitStatus> exits_;
  double started_s_ = 0;
  bool done_ = false;
  bool killed_ = false;
  ProbeResult result_;
};

// Parses one node's probe output into `result` (exposed for unit tests).
void ParseRankProbe(const std::string& host, const std::string& output, ProbeResult& result);

}  // namespace dtrain
