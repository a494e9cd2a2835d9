// The probe run: one Transport::Start for all nodes plus the listener, then one poll loop that
// collects output until every probe has ended or the time is up.
#include "doctor/probe_runner.h"

#include "launcher/shm_leftovers.h"
#include "launcher/ssh/remote_command.h"

#include <algorithm>
#include <chrono>
#include <csignal>

#include <fmt/format.h>

namespace dtrain {

std::string_view ProbeScript();  // templates/probe.sh, embedded at build time

namespace {

double EpochSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Collects each process's output and exit; remembers when each one's first bytes arrived,
// which is when its `time=` line (the probe's first) reached the doctor.
class ProbeEvents : public TransportEvents {
 public:
  explicit ProbeEvents(size_t count)
      : output(count),
        first_arrival(count, -1),
        exits(count),
        exited(count, false),
        exit_s(count, 0) {}

  void OnOutput(int id, OutputStream, std::string_view bytes) override {
    if (!Valid(id)) return;
    if (first_arrival[id] < 0) first_arrival[id] = EpochSeconds();
    output[id].append(bytes.data(), bytes.size());
  }
  void OnExit(int id, const ExitStatus& status) override {
    if (!Valid(id)) return;
    exits[id] = status;
    exited[id] = true;
    exit_s[id] = Since(start);
  }

  std::vector<std::string> output;
  std::vector<double> first_arrival;
  std::vector<ExitStatus> exits;
  std::vector<bool> exited;
  std::vector<double> exit_s;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

 private:
  bool Valid(int id) const { return id >= 0 && static_cast<size_t>(id) < output.size(); }
};

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

// Fills one node's facts from what its probe printed and how it ended. `killed_at` is when the
// run stopped every probe, at the timeout or when it was cancelled (`cut_short`); -1: it did not.
// A probe that ended badly from then on was stopped by it.
void FinishNode(const ProbeEvents& events, size_t i, double timeout_s, double killed_at,
                bool cut_short, NodeFacts& facts) {
  ApplyProbeLines(SplitProbeOutput(events.output[i]), events.first_arrival[i], facts);
  facts.probe_seconds = events.exit_s[i];
  const bool stopped = killed_at >= 0 && events.exit_s[i] >= killed_at && !events.exits[i].ok();
  if (!events.exited[i] || stopped) {
    facts.reached = false;
    if (cut_short) {
      facts.failure = ReachFailure::kCutShort;
      facts.error = fmt::format("its probe was cut short after {:.1f} s", killed_at);
      return;
    }
    facts.failure = ReachFailure::kTimeout;
    facts.error = fmt::format("no answer within {:g} s (the probe was stopped)", timeout_s);
    return;
  }
  const ExitStatus& status = events.exits[i];
  if (!status.error.empty()) {
    facts.reached = false;
    facts.failure = ClassifyReachError(status.error);
    facts.error = status.error;
  } else if (!facts.reached) {
    facts.failure = ReachFailure::kOther;
    std::string last = LastLine(events.output[i]);
    facts.error = fmt::format("the probe ended early ({}){}{}", status.Describe(),
                              last.empty() ? "" : ": ", last);
  }
}

ListenerResult ReadListener(const ProbeEvents& events, size_t id) {
  ListenerResult result;
  for (const auto& [key, value] : SplitProbeOutput(events.output[id])) {
    if (key == "listening") result.started = true;
    if (key == "listen_error") result.error = value;
  }
  if (!result.started && result.error.empty()) {
    const ExitStatus& status = events.exits[id];
    result.error = !status.error.empty() ? status.error
                   : events.exited[id]   ? "the listener ended early (" + status.Describe() + ")"
                                         : "the listener did not start in time";
  }
  return result;
}

}  // namespace

std::vector<size_t> HealthChecksRun(const ClusterSpec& spec, const ProbeOptions& options) {
  std::vector<size_t> run;
  for (size_t i = 0; i < spec.health_checks.size(); ++i) {
    if (options.warning_checks || !spec.health_checks[i].warning) run.push_back(i);
  }
  return run;
}

std::map<std::string, std::string> ProbeEnvironment(const ClusterSpec& spec, size_t node_index,
                                                    const ProbeOptions& options) {
  std::map<std::string, std::string> env = spec.env;
  for (const auto& [k, v] : spec.nodes[node_index].env) env[k] = v;
  env["DTRAIN_PROBE_WORKDIR"] = options.workdir;
  if (!spec.python.empty()) env["DTRAIN_PROBE_PYTHON"] = spec.python;
  if (!options.clip_dir.empty()) env["DTRAIN_PROBE_CLIP_DIR"] = options.clip_dir;
  if (!options.log_dir.empty()) env["DTRAIN_PROBE_LOG_DIR"] = options.log_dir;
  if (!options.skip.empty()) env["DTRAIN_PROBE_SKIP"] = options.skip;
  // The health checks: their indices, each one's command and limit (templates/probe.sh), and
  // the node's name as the ranks see it.
  const std::vector<size_t> checks = HealthChecksRun(spec, options);
  if (!checks.empty()) {
    std::string list;
    for (size_t i : checks) {
      list += (list.empty() ? "" : " ") + std::to_string(i);
      env[fmt::format("DTRAIN_PROBE_CHECK_{}", i)] = spec.health_checks[i].run;
      env[fmt::format("DTRAIN_PROBE_CHECK_{}_TIMEOUT", i)] =
          std::to_string(spec.health_checks[i].timeout_s);
    }
    env["DTRAIN_PROBE_CHECKS"] = list;
    env["DTRAIN_NODE"] = spec.nodes[node_index].host;
  }
  if (options.rendezvous) {
    env["DTRAIN_PROBE_RDZV_ADDR"] = spec.nodes[0].address;
    env["DTRAIN_PROBE_RDZV_PORT"] = std::to_string(spec.rendezvous_port);
  }
  return env;
}

ProbeRun RunProbes(const ClusterSpec& spec, Transport& transport, const ProbeOptions& given) {
  // The probe waits for its slowest health check (each under its own limit), and a little more.
  ProbeOptions options = given;
  for (size_t i : HealthChecksRun(spec, options)) {
    options.timeout_s = std::max(options.timeout_s, spec.health_checks[i].timeout_s + 5.0);
  }
  const size_t n = spec.nodes.size();
  ProbeRun run;
  run.master_addr = n ? spec.nodes[0].address : "";
  run.master_port = spec.rendezvous_port;
  std::vector<ProcessSpec> procs;
  for (size_t i = 0; i < n; ++i) {
    ProcessSpec p;
    p.id = static_cast<int>(i);
    p.node_index = static_cast<int>(i);
    p.argv = {"sh", "-s"};
    p.env = ProbeEnvironment(spec, i, options);
    p.python_path_head = options.workdir;
    p.cwd = "/";
    p.beside_ranks = options.beside_ranks;
    p.own_step = true;
    p.stdin_data = std::string(DtrainProgramLookup()) + std::string(ShmSegmentsScript()) +
                   std::string(ProbeScript());
    procs.push_back(std::move(p));
  }
  const bool listen = options.rendezvous && n > 0;
  if (listen) {
    // Started first, so that it is more likely listening when the probes first try it.
    ProcessSpec l = procs[0];
    l.id = static_cast<int>(n);
    l.env["DTRAIN_PROBE_MODE"] = "listen";
    l.env["DTRAIN_PROBE_LISTEN_S"] = fmt::format("{:g}", options.timeout_s + 5);
    procs.insert(procs.begin(), std::move(l));
  }
  ProbeEvents events(procs.size());
  transport.Start(procs, events);

  // Once every probe has ended and the listener has said whether it listens (or ended), the
  // listener gets SIGTERM, then SIGKILL a second later. Past the timeout everything gets SIGKILL;
  // a transport that still reports nothing is left behind after `grace_s` rather than waited for.
  const double grace_s = 2;
  double done_at = -1, killed_at = -1;
  bool listener_killed = false, cut_short = false;
  while (true) {
    double elapsed = Since(events.start);
    bool done = !listen || events.exited[n] ||
                events.output[n].find("listening=") != std::string::npos ||
                events.output[n].find("listen_error=") != std::string::npos;
    for (size_t i = 0; i < n; ++i) done = done && events.exited[i];
    if (done && done_at < 0) {
      done_at = elapsed;
      if (listen) transport.SignalAll(SIGTERM);
    }
    if (done_at >= 0 && listen && !listener_killed && elapsed > done_at + 1) {
      transport.SignalAll(SIGKILL);
      listener_killed = true;
    }
    if (done_at < 0 && killed_at < 0 && elapsed > options.timeout_s) {
      transport.SignalAll(SIGKILL);
      killed_at = elapsed;
    }
    if (options.cancelled && options.cancelled()) {
      transport.SignalAll(SIGKILL);
      killed_at = elapsed;
      cut_short = true;
      break;
    }
    if (killed_at >= 0 && elapsed > killed_at + grace_s) break;
    if (done_at >= 0 && elapsed > done_at + 1 + grace_s) break;
    if (!transport.Poll(done ? 100 : 50, events)) break;
  }
  for (size_t i = 0; i < n; ++i) {
    NodeFacts facts;
    facts.host = spec.nodes[i].host;
    facts.address = spec.nodes[i].address;
    facts.slots = spec.nodes[i].slots;
    facts.listed_gpus = spec.nodes[i].gpus;
    FinishNode(events, i, options.timeout_s, killed_at, cut_short, facts);
    run.nodes.push_back(std::move(facts));
  }
  if (listen) run.listener = ReadListener(events, n);
  run.wall_s = Since(events.start);
  return run;
}

}  // namespace dtrain
