// One process per ssh node, run by the ssh transport (the launcher's own connections, host key
// checks and credentials): a shell loop that answers every line on its stdin with the node's
// wall clock. The launcher sends the next ping only once the answer to the last one is in, so
// each sample's round trip is one network round trip plus the node's answer.
#include "launcher/node_clock.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "launcher/rank_log.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

// Answers each line with the wall clock as seconds.micros: bash's $EPOCHREALTIME (no process
// per answer) where there is a bash 5, else GNU date. $1: whole seconds after which the loop
// ends, as no ping comes after the measurement gave up (a link that went down mid-measure
// brings no EOF): bash's read times out once no ping came for that long; the date loop ends
// that long after its start (timeout(1), where the node has it).
constexpr const char* kClockScript = R"sh(if command -v bash >/dev/null 2>&1 &&
   [ -n "$(bash -c 'echo "${EPOCHREALTIME-}"' 2>/dev/null)" ]; then
  exec bash -c 'while read -r -t "$1" _; do echo "$EPOCHREALTIME"; done' dtrain-clock "$1"
fi
if command -v timeout >/dev/null 2>&1; then
  exec timeout "$1" sh -c 'while read -r _; do date +%s.%6N; done'
fi
while read -r _; do date +%s.%6N; done)sh";
// Once logged in, a node has this long to answer its pings. The logins themselves may take up to
// the connect timeout (many nodes logging in at once from one launcher take seconds): the whole
// measurement gives up after the two, or as soon as the launch wants its result (NodeClockProbe
// runs it beside the ranks, so nothing waits for it meanwhile).
constexpr auto kMeasureLimit = std::chrono::milliseconds(1500);

// "1790857026.123456" (or with a ',': bash follows the locale) -> µs; false for anything else.
bool ParseWallClock(std::string_view text, int64_t& us) {
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  const size_t point = text.find_first_of(".,");
  if (point == 0 || point == std::string_view::npos || text.size() - point - 1 != 6) return false;
  int64_t seconds = 0;
  int64_t micros = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == point) continue;
    if (text[i] < '0' || text[i] > '9') return false;
    int64_t& part = i < point ? seconds : micros;
    part = part * 10 + (text[i] - '0');
  }
  us = seconds * 1000000 + micros;
  return true;
}

// One node's pings: feeds the next one to its stdin once the last was answered.
class ClockPings : public StdinSource {
 public:
  explicit ClockPings(int wanted) : wanted_(wanted) {}

  bool Next(std::string& out, size_t) override {
    if (waiting_) return true;  // nothing to send until the answer is in
    if (static_cast<int>(samples_.size()) >= wanted_ || !problem.empty()) return false;
    out += '\n';
    sent_us_ = WallMicros();
    waiting_ = true;
    return true;
  }

  void Answer(std::string_view bytes) {
    const int64_t now = WallMicros();
    line_.append(bytes);
    for (size_t end; (end = line_.find('\n')) != std::string::npos; line_.erase(0, end + 1)) {
      int64_t remote = 0;
      if (!waiting_ || !ParseWallClock(std::string_view(line_).substr(0, end), remote)) {
        if (problem.empty()) problem = fmt::format("unexpected answer '{}'", line_.substr(0, end));
        continue;
      }
      samples_.push_back({sent_us_, remote, now});
      waiting_ = false;
    }
  }

  const std::vector<ClockSample>& samples() const { return samples_; }
  std::string problem;  // the node's answer was not a clock
  std::string error;    // the transport could not run the loop

 private:
  int wanted_;
  bool waiting_ = false;
  int64_t sent_us_ = 0;
  std::string line_;
  std::vector<ClockSample> samples_;
};

// Hands every node's answers to its pings.
class ClockAnswers : public TransportEvents {
 public:
  explicit ClockAnswers(std::vector<std::shared_ptr<ClockPings>>& pings) : pings_(pings) {}
  void OnOutput(int id, OutputStream stream, std::string_view bytes) override {
    if (stream == OutputStream::kStdout) pings_.at(id)->Answer(bytes);
  }
  void OnExit(int id, const ExitStatus& status) override {
    if (!status.ok())
      pings_.at(id)->error = status.error.empty() ? status.Describe() : status.error;
  }

 private:
  std::vector<std::shared_ptr<ClockPings>>& pings_;
};

}  // namespace

std::vector<std::string> NodeClockCommand(int limit_s) {
  return {"/bin/sh", "-c", kClockScript, "dtrain-clock", std::to_string(std::max(1, limit_s))};
}

bool EstimateNodeClock(const std::vector<ClockSample>& samples, NodeClock& clock) {
  const ClockSample* best = nullptr;
  for (const ClockSample& s : samples) {
    if (s.received_us < s.sent_us) continue;  // the launcher's clock stepped back meanwhile
    if (!best || s.received_us - s.sent_us < best->received_us - best->sent_us) best = &s;
  }
  if (!best) return false;
  clock.rtt_us = best->received_us - best->sent_us;
  // The node read its clock somewhere in the round trip; the middle is off by rtt/2 at most.
  clock.offset_us = best->sent_us + clock.rtt_us / 2 - best->remote_us;
  return true;
}

std::map<std::string, NodeClock> MeasureNodeClocks(const ClusterSpec& spec,
                                                   std::vector<std::string>& warnings, int pings,
                                                   const std::atomic<bool>* stop) {
  std::map<std::string, NodeClock> clocks;
  if (spec.transport == TransportKind::kLocal) {
    for (const NodeSpec& node : spec.nodes) clocks[node.host] = NodeClock{};
    return clocks;
  }
  if (spec.transport != TransportKind::kSsh || spec.nodes.empty()) return clocks;

  std::vector<std::shared_ptr<ClockPings>> node_pings;
  std::vector<ProcessSpec> procs;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    node_pings.push_back(std::make_shared<ClockPings>(pings));
    ProcessSpec proc;
    proc.id = static_cast<int>(i);
    proc.node_index = static_cast<int>(i);
    // What the node answers after the measurement gave up goes nowhere.
    proc.argv = NodeClockCommand(
        spec.ssh.connect_timeout_s +
        static_cast<int>(std::chrono::ceil<std::chrono::seconds>(kMeasureLimit).count()) + 1);
    proc.stdin_source = node_pings.back();
    procs.push_back(std::move(proc));
  }
  ClockAnswers answers(node_pings);
  // Runs beside the ranks' transport, which starts on the sessions the check before launch
  // left: this one logs in afresh rather than race it for them.
  std::unique_ptr<Transport> transport =
      MakeSshTransport(spec, kDefaultRemoteGraceS, /*take_idle_sessions=*/false);
  transport->Start(procs, answers);
  const auto limit = std::chrono::seconds(spec.ssh.connect_timeout_s) + kMeasureLimit;
  const auto give_up = std::chrono::steady_clock::now() + limit;
  bool running = true;
  bool stopped = false;
  // 1 ms polls: a ping goes out on the poll after its answer came in.
  while (running && std::chrono::steady_clock::now() < give_up) {
    if (stop && stop->load()) {
      stopped = true;
      break;
    }
    running = transport->Poll(1, answers);
  }
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const ClockPings& p = *node_pings[i];
    NodeClock clock;
    if (!p.problem.empty() || !EstimateNodeClock(p.samples(), clock)) {
      const std::string why =
          !p.problem.empty() ? p.problem
          : !p.error.empty() ? p.error
          : stopped ? fmt::format("no answer by {:g} s after the job's first attempt ended",
                                  std::chrono::duration<double>(kMeasureLimit).count())
          : running
              ? fmt::format("no answer within {:g} s", std::chrono::duration<double>(limit).count())
              : "no answer";
      warnings.push_back(fmt::format(
          "node {}: clock offset not measured ({}); its PyTorch profiler traces are merged on "
          "its own clock",
          spec.nodes[i].host, why));
      continue;
    }
    clocks[spec.nodes[i].host] = clock;
  }
  return clocks;  // the transport's end closes whatever still runs
}

NodeClockProbe::NodeClockProbe(const ClusterSpec& spec) {
  thread_ = std::thread([this, spec] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    try {
      clocks_ = MeasureNodeClocks(spec, warnings_, kDefaultClockPings, &stop_);
    } catch (const std::exception& e) {
      warnings_.push_back(fmt::format("node clock offsets not measured: {}", e.what()));
    }
    done_ = true;
  });
}

NodeClockProbe::~NodeClockProbe() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, NodeClock> NodeClockProbe::Take(std::vector<std::string>& warnings) {
  // A job shorter than the logins: they get the pings' time once more, then stop.
  const auto until = std::chrono::steady_clock::now() + kMeasureLimit;
  while (!done_ && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (std::string& w : warnings_) warnings.push_back(std::move(w));
  warnings_.clear();
  return std::move(clocks_);
}

}  // namespace dtrain
