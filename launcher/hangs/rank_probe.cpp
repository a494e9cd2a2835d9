// RankProbe: one `sh -s` per node with templates/rank_probe.sh on stdin; output parsed when the
// node's probe ends. A node that does not answer by the deadline is named, never waited for.
#include "launcher/hangs/rank_probe.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

namespace dtrain {

std::string_view RankProbeScript();  // templates/rank_probe.sh, embedded at build time

namespace {

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// "<first word> <rest>"
std::pair<std::string, std::string> SplitWord(const std::string& line) {
  const size_t space = line.find(' ');
  if (space == std::string::npos) return {line, ""};
  return {line.substr(0, space), line.substr(space + 1)};
}

// Fields of /proc/PID/stat after "(comm)": the name may hold spaces and parentheses.
void ParseStat(const std::string& stat, long ticks_per_s, RankProcess& p) {
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return;
  p.comm = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> f;
  for (std::string word; rest >> word;) f.push_back(word);
  // f[0] is field 3 (state); utime and stime are fields 14 and 15.
  if (f.size() < 13) return;
  p.state = f[0].empty() ? '?' : f[0][0];
  p.ppid = std::atoi(f[1].c_str());
  const double ticks = std::atof(f[11].c_str()) + std::atof(f[12].c_str());
  p.cpu_s = ticks / static_cast<double>(ticks_per_s > 0 ? ticks_per_s : 100);
}

bool IsWrapper(const std::string& comm) {
  static const char* const kWrappers[] = {"sh", "bash", "dash", "env", "timeout", "srun", "nohup"};
  return std::find(std::begin(kWrappers), std::end(kWrappers), comm) != std::end(kWrappers);
}

}  // namespace

void ParseRankProbe(const std::string& host, const std::string& output, ProbeResult& result) {
  std::istringstream in(output);
  long ticks_per_s = 100;
  RankProcess* current = nullptr;
  std::map<int, std::vector<RankProcess>> processes;  // rank -> as listed
  std::string line;
  // Listed in order; `current` points at the last one until the next is listed.
  struct Pending {
    int rank;
    RankProcess process;
  };
  std::vector<Pending> listed;
  std::map<int, std::vector<std::string>> stack_lines;
  std::map<int, std::map<std::string, std::string>> sources;
  std::map<int, std::string> stack_errors;
  while (std::getline(in, line)) {
    auto [key, rest] = SplitWord(line);
    if (key == "ticks") {
      ticks_per_s = std::atol(rest.c_str());
    } else if (key == "proc") {
      auto [pid, rank] = SplitWord(rest);
      listed.push_back({std::atoi(rank.c_str()), RankProcess{}});
      current = &listed.back().process;
      current->pid = std::atoi(pid.c_str());
    } else if (key == "stat" && current) {
      ParseStat(rest, ticks_per_s, *current);
    } else if (key == "wchan" && current) {
      current->wchan = rest;
    } else if (key == "cmd" && current) {
      current->cmd = rest;
      while (!current->cmd.empty() && current->cmd.back() == ' ') current->cmd.pop_back();
    } else if (key == "hb") {
      auto [rank, after] = SplitWord(rest);
      auto [age_ms, kv] = SplitWord(after);
      RankFacts& facts = result.ranks[std::atoi(rank.c_str())];
      facts.heartbeat_age_s = std::atof(age_ms.c_str()) / 1000.0;
      auto [k, v] = SplitWord(kv);
      if (!k.empty()) facts.heartbeat[k] = v;
    } else if (key == "py") {
      auto [pid, text] = SplitWord(rest);
      stack_lines[std::atoi(pid.c_str())].push_back(text);
    } else if (key == "pysrc") {
      auto [pid, after] = SplitWord(rest);
      auto [where, text] = SplitWord(after);
      sources[std::atoi(pid.c_str())][where] = text;
    } else if (key == "pyerr") {
      auto [pid, text] = SplitWord(rest);
      stack_errors[std::atoi(pid.c_str())] = text;
    }
  }
  for (Pending& p : listed) {
    p.process.stack_lines = std::move(stack_lines[p.process.pid]);
    p.process.frame_sources = std::move(sources[p.process.pid]);
    p.process.stack_error = std::move(stack_errors[p.process.pid]);
    processes[p.rank].push_back(std::move(p.process));
  }
  for (auto& [rank, procs] : processes) {
    RankFacts& facts = result.ranks[rank];
    facts.rank = rank;
    facts.host = host;
    // The rank's own process first: not a wrapper, lowest pid.
    std::stable_sort(procs.begin(), procs.end(), [](const RankProcess& a, const RankProcess& b) {
      if (IsWrapper(a.comm) != IsWrapper(b.comm)) return !IsWrapper(a.comm);
      return a.pid < b.pid;
    });
    facts.cpu_s = 0;
    for (const RankProcess& p : procs) facts.cpu_s += p.cpu_s;
    facts.processes = std::move(procs);
  }
  for (auto& [rank, facts] : result.ranks) {
    if (facts.host.empty()) facts.host = host;
    facts.rank = rank;
  }
}

RankProbe::RankProbe(const ClusterSpec& spec, ProbeRequest request, double deadline_s)
    : spec_(spec), request_(std::move(request)), deadline_s_(deadline_s) {}

RankProbe::~RankProbe() {
  if (transport_ && !done_) transport_->SignalAll(SIGKILL);
}

void RankProbe::Start() {
  transport_ = MakeTransport(spec_);
  std::vector<ProcessSpec> procs;
  for (size_t i = 0; i < spec_.nodes.size(); ++i) {
    ProcessSpec p;
    p.id = static_cast<int>(i);
    p.node_index = static_cast<int>(i);
    p.argv = {"sh", "-s"};
    p.env["DTRAIN_PROBE_JOB"] = request_.job_name;
    if (!request_.job_dir.empty()) p.env["DTRAIN_PROBE_DIR"] = request_.job_dir;
    if (request_.stacks) p.env["DTRAIN_PROBE_STACKS"] = "1";
    if (!request_.py_spy.empty()) p.env["DTRAIN_PROBE_PY_SPY"] = request_.py_spy;
    p.cwd = "/";
    p.stdin_data = std::string(RankProbeScript());
    p.beside_ranks = true;  // the ranks hold their nodes' CPUs while it looks at them
    p.own_step = true;
    procs.push_back(std::move(p));
  }
  started_s_ = NowSeconds();
  transport_->Start(procs, *this);
}

bool RankProbe::Poll(int timeout_ms) {
  if (done_) return true;
  const bool running = transport_->Poll(timeout_ms, *this);
  if (!running) {
    Finish();
  } else if (NowSeconds() - started_s_ > deadline_s_ && !killed_) {
    transport_->SignalAll(SIGKILL);  // its exits arrive with the next polls
    killed_ = true;
  } else if (killed_ && NowSeconds() - started_s_ > deadline_s_ + 5) {
    Finish();  // a transport that still says nothing is left behind
  }
  return done_;
}

ProbeResult RankProbe::RunToEnd(const ClusterSpec& spec, ProbeRequest request, double deadline_s) {
  RankProbe probe(spec, std::move(request), deadline_s);
  probe.Start();
  while (!probe.Poll(200)) {
  }
  return probe.result();
}

void RankProbe::OnOutput(int id, OutputStream stream, std::string_view bytes) {
  if (stream == OutputStream::kStdout) output_[id].append(bytes);
}

void RankProbe::OnExit(int id, const ExitStatus& status) {
  exits_[id] = status;
}

void RankProbe::Finish() {
  done_ = true;
  for (size_t i = 0; i < spec_.nodes.size(); ++i) {
    const int id = static_cast<int>(i);
    const std::string& host = spec_.nodes[i].host;
    ParseRankProbe(host, output_[id], result_);
    auto exit = exits_.find(id);
    if (exit == exits_.end()) {
      result_.node_errors[host] = fmt::format("no answer within {:g} s", deadline_s_);
    } else if (!exit->second.ok()) {
      result_.node_errors[host] =
          killed_ ? fmt::format("no answer within {:g} s", deadline_s_) : exit->second.Describe();
    }
  }
}

}  // namespace dtrain
