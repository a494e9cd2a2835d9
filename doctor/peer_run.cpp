// The peer connection test's run: one process per taking-part node through the cluster's
// transport, polled until every one has ended (peer_run.h).
#include "doctor/peer_run.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/ssh/remote_command.h"
#include "launcher/transport.h"

namespace dtrain {

std::string_view ProbeScript();  // templates/probe.sh, embedded at build time

namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class PeerEvents : public TransportEvents {
 public:
  explicit PeerEvents(size_t count) : output(count), exits(count), exited(count, false) {}
  void OnOutput(int id, OutputStream, std::string_view bytes) override {
    if (id >= 0 && static_cast<size_t>(id) < output.size()) output[id].append(bytes);
  }
  void OnExit(int id, const ExitStatus& status) override {
    if (id < 0 || static_cast<size_t>(id) >= output.size()) return;
    exits[id] = status;
    exited[id] = true;
  }
  std::vector<std::string> output;
  std::vector<ExitStatus> exits;
  std::vector<bool> exited;
};

// A port in the kernel's default range for ephemeral ports, where NCCL's and Gloo's own
// listening sockets are, and a token that tells this run's listeners from anything else.
int RandomPort(std::mt19937& random) {
  return std::uniform_int_distribution<int>(32768, 60999)(random);
}
std::string RandomToken(std::mt19937& random) {
  return fmt::format("{:08x}{:08x}", random(), random());
}

// One round of the test on the port `port`: fills run.connections, listen_errors, not_tested.
void RunRound(const ClusterSpec& spec, const std::vector<size_t>& taking_part,
              const std::vector<std::vector<CollectiveEndpoint>>& tested,
              const PeerOptions& options, const std::string& token, PeerRun& run) {
  // plan[k]: the positions in taking_part that its k-th node connects to; callers[k]: how many
  // nodes connect to it (each to every address it listens on), so that it knows when it is done.
  const std::vector<std::vector<size_t>> plan = PeerTargets(taking_part.size(), options.plan);
  std::vector<size_t> callers(taking_part.size(), 0);
  for (const std::vector<size_t>& targets : plan) {
    for (size_t t : targets) ++callers[t];
  }
  std::vector<ProcessSpec> procs;
  for (size_t k = 0; k < taking_part.size(); ++k) {
    const size_t i = taking_part[k];
    ProcessSpec p;
    p.id = static_cast<int>(k);
    p.node_index = static_cast<int>(i);
    p.argv = {"sh", "-s"};
    p.env = spec.env;
    for (const auto& [key, value] : spec.nodes[i].env) p.env[key] = value;
    std::string listen, targets;
    for (const CollectiveEndpoint& e : tested[i]) {
      listen += (listen.empty() ? "" : " ") + (e.interface.empty() ? "*" : e.address);
    }
    for (size_t t : plan[k]) {
      const size_t j = taking_part[t];
      for (const CollectiveEndpoint& e : tested[j]) {
        targets += fmt::format("{}{}={}", targets.empty() ? "" : " ", j, e.address);
      }
    }
    p.env["DTRAIN_PROBE_MODE"] = "peers";
    p.env["DTRAIN_PROBE_PEERS_PORT"] = std::to_string(run.port);
    p.env["DTRAIN_PROBE_PEERS_TOKEN"] = token;
    p.env["DTRAIN_PROBE_PEERS_INDEX"] = std::to_string(i);
    p.env["DTRAIN_PROBE_PEERS_WAIT_S"] = fmt::format("{:g}", options.wait_s);
    p.env["DTRAIN_PROBE_PEERS_LISTEN"] = listen;
    p.env["DTRAIN_PROBE_PEERS_TARGETS"] = targets;
    p.env["DTRAIN_PROBE_PEERS_CALLERS"] = std::to_string(callers[k]);
    p.cwd = "/";
    p.beside_ranks = options.beside_ranks;
    p.own_step = true;
    p.stdin_data = std::string(DtrainProgramLookup()) + std::string(ProbeScript());
    procs.push_back(std::move(p));
  }
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  PeerEvents events(procs.size());
  const auto start = std::chrono::steady_clock::now();
  transport->Start(procs, events);
  // Each process ends by itself once the others have connected to it (or its retries are
  // over), so that its session can serve the next step. Past the limit (the retries, the
  // transport's start and room) everything is killed.
  const double limit_s = options.wait_s + 15;
  double killed_at = -1;
  while (true) {
    const double elapsed = Since(start);
    const bool cancelled = options.cancelled && options.cancelled();
    if (killed_at < 0 && (cancelled || elapsed > limit_s)) {
      transport->SignalAll(SIGKILL);
      killed_at = elapsed;
    }
    if (killed_at >= 0 && (cancelled || elapsed > killed_at + 2)) break;
    if (!transport->Poll(50, events)) break;
  }
  for (size_t k = 0; k < procs.size(); ++k) {
    std::string exit;
    const bool said_done = events.output[k].find("peers_done=1") != std::string::npos;
    if (!events.exited[k] || (killed_at >= 0 && !said_done)) {
      exit = fmt::format("no answer within {:g} s (the test was stopped)", limit_s);
    } else if (!said_done) {
      exit = !events.exits[k].error.empty() ? events.exits[k].error
                                            : "it ended early (" + events.exits[k].Describe() + ")";
    }
    ApplyPeerOutput(taking_part[k], events.output[k], exit, run);
  }
}

// DTRAIN_PROBE_SKIP in the cluster file's env naming "peers" (as it names the probe's parts).
bool SkipsPeers(const ClusterSpec& spec) {
  auto it = spec.env.find("DTRAIN_PROBE_SKIP");
  if (it == spec.env.end()) return false;
  std::istringstream words(it->second);
  for (std::string word; words >> word;) {
    if (word == "peers") return true;
  }
  return false;
}

}  // namespace

void ApplyPeerOutput(size_t node, const std::string& output, const std::string& exit,
                     PeerRun& run) {
  if (run.not_tested.size() <= node) run.not_tested.resize(node + 1);
  if (run.listen_errors.size() <= node) run.listen_errors.resize(node + 1);
  std::string error;
  for (const auto& [key, value] : SplitProbeOutput(output)) {
    if (key == "peers_error") error = value;
    if (key == "peers_listen") {
      const std::vector<std::string> parts = SplitOn(value, ';', 2);
      if (parts.size() == 2 && parts[1] != "ok") {
        std::string& errors = run.listen_errors[node];
        errors += (errors.empty() ? "" : "; ") + parts[0] + ": " + parts[1];
      }
    }
    if (key == "peer") {
      const std::vector<std::string> parts = SplitOn(value, ';', 5);
      if (parts.size() != 5) continue;
      PeerConnection c;
      c.from = node;
      try {
        c.to = std::stoul(parts[0]);
        c.ms = std::stod(parts[3]);
      } catch (const std::exception&) {
        continue;
      }
      c.address = parts[1];
      c.result = parts[2];
      c.detail = parts[4];
      run.connections.push_back(std::move(c));
    }
  }
  if (!error.empty()) {
    run.not_tested[node] = error;
  } else if (!exit.empty()) {
    run.not_tested[node] = exit;
  }
}

PeerRun RunPeerConnections(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes,
                           const PeerOptions& options) {
  PeerRun run;
  run.wait_s = options.wait_s;
  if (SkipsPeers(spec)) return run;
  run.endpoints.resize(nodes.size());
  run.not_tested.resize(nodes.size());
  run.listen_errors.resize(nodes.size());
  run.took_part.resize(nodes.size(), false);
  std::vector<size_t> taking_part;
  std::map<std::string, size_t> machine;  // address in the cluster file -> its first node
  for (size_t i = 0; i < nodes.size() && i < spec.nodes.size(); ++i) {
    if (!nodes[i].reached) {
      run.not_tested[i] = "not reached";
      continue;
    }
    // Nodes the cluster file gives one address are one machine to the test (Slurm nodes that
    // are one host's several slurmd): the first of them takes part for all.
    auto [first, added] = machine.emplace(spec.nodes[i].address, i);
    if (!added) {
      run.not_tested[i] = "it has the address of node " + nodes[first->second].host;
      continue;
    }
    std::vector<std::string> variables;
    run.endpoints[i] = CollectiveEndpoints(nodes[i], &variables);
    for (const std::string& v : variables) {
      if (std::find(run.variables.begin(), run.variables.end(), v) == run.variables.end()) {
        run.variables.push_back(v);
      }
    }
  }
  // Connected to: the addresses whose link is up and that no other node has too (two nodes with
  // one address are the verdict's finding; a connection there proves nothing).
  std::map<std::string, int> holders;
  for (const auto& list : run.endpoints) {
    for (const CollectiveEndpoint& e : list) ++holders[e.address];
  }
  std::vector<std::vector<CollectiveEndpoint>> tested(run.endpoints.size());
  for (size_t i = 0; i < run.endpoints.size(); ++i) {
    if (!run.not_tested[i].empty()) continue;
    for (const CollectiveEndpoint& e : run.endpoints[i]) {
      if (e.link_up && holders[e.address] == 1) tested[i].push_back(e);
    }
    if (tested[i].empty()) {
      run.not_tested[i] = !nodes[i].health.interfaces_read && !run.variables.empty()
                              ? "its interfaces are unknown"
                              : "the job's variables pick no interface there that is up and "
                                "its own";
      continue;
    }
    taking_part.push_back(i);
  }
  if (taking_part.size() < 2) return run;
  run.ran = true;
  for (size_t i : taking_part) run.took_part[i] = true;
  run.offsets = PeerOffsets(taking_part.size(), options.plan);
  run.rounds_to_cover = RoundsToCoverAll(taking_part.size(), options.plan);
  const auto start = std::chrono::steady_clock::now();
  std::mt19937 random(std::random_device{}());
  const std::string token = RandomToken(random);
  for (int round = 0; round < 2; ++round) {
    run.port = RandomPort(random);
    run.connections.clear();
    for (size_t i : taking_part) run.not_tested[i].clear(), run.listen_errors[i].clear();
    RunRound(spec, taking_part, tested, options, token, run);
    bool in_use = false;
    for (size_t i : taking_part) {
      in_use = in_use || run.listen_errors[i].find("in use") != std::string::npos;
    }
    if (!in_use || (options.cancelled && options.cancelled())) break;
  }
  run.wall_s = Since(start);
  return run;
}

std::string AddPeerConnectionsJson(const std::string& report_json, const PeerRun& run,
                                   const std::vector<NodeFacts>& nodes) {
  auto name = [&](size_t i) { return i < nodes.size() ? nodes[i].host : std::to_string(i); };
  nlohmann::json addresses = nlohmann::json::object();
  for (size_t i = 0; i < run.endpoints.size(); ++i) {
    nlohmann::json list = nlohmann::json::array();
    for (const CollectiveEndpoint& e : run.endpoints[i]) {
      list.push_back({{"interface", e.interface}, {"address", e.address}, {"link_up", e.link_up}});
    }
    nlohmann::json node = {{"addresses", list}};
    if (i < run.not_tested.size() && !run.not_tested[i].empty()) {
      node["not_tested"] = run.not_tested[i];
    }
    if (i < run.listen_errors.size() && !run.listen_errors[i].empty()) {
      node["listen_error"] = run.listen_errors[i];
    }
    addresses[name(i)] = node;
  }
  // Every connection that failed; of those that were made, how many and the slowest (a full
  // list would be n * (n - 1) entries).
  nlohmann::json failed = nlohmann::json::array();
  size_t ok = 0;
  double slowest_ms = 0;
  for (const PeerConnection& c : run.connections) {
    if (c.result == "ok") {
      ++ok;
      slowest_ms = std::max(slowest_ms, c.ms);
      continue;
    }
    failed.push_back({{"from", name(c.from)},
                      {"to", name(c.to)},
                      {"address", c.address},
                      {"result", c.result},
                      {"ms", c.ms},
                      {"detail", c.detail}});
  }
  nlohmann::json report = nlohmann::json::parse(report_json);
  report["peer_connections"] = {{"ran", run.ran},
                                {"port", run.port},
                                {"variables", run.variables},
                                {"wait_s", run.wait_s},
                                {"wall_s", run.wall_s},
                                {"offsets", run.offsets},
                                {"rounds_to_cover", run.rounds_to_cover},
                                {"nodes", addresses},
                                {"connections_made", ok},
                                {"slowest_connection_ms", slowest_ms},
                                {"failed_connections", failed}};
  return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace dtrain
