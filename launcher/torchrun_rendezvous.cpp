#include "launcher/torchrun_rendezvous.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/error.h"
#include "launcher/this_machine.h"

namespace dtrain {

std::string NotUsed(const std::vector<std::string>& settings) {
  return fmt::format("{} {} not used", fmt::join(settings, " and "),
                     settings.size() > 1 ? "are" : "is");
}

namespace {

// --rdzv-endpoint HOST[:PORT] -> host and port (0: not given), split as torchrun splits it: at
// the last colon, unless the whole is a bracketed IPv6 address; [V6]:PORT loses its brackets.
std::pair<std::string, int> SplitEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  const bool bracketed = !endpoint.empty() && endpoint.front() == '[' && endpoint.back() == ']';
  const bool has_port = !bracketed && colon != std::string::npos;
  std::string host = has_port ? endpoint.substr(0, colon) : endpoint;
  const std::string port = has_port ? endpoint.substr(colon + 1) : "";
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const bool port_ok = !has_port || (!port.empty() && port.size() <= 5 &&
                                     port.find_first_not_of("0123456789") == std::string::npos &&
                                     std::stoi(port) <= 65535);
  if (host.empty() || !port_ok) {
    throw UsageError(fmt::format(
        "--rdzv-endpoint {}: expected HOST or HOST:PORT (PORT from 0 to 65535), as torchrun "
        "takes it",
        endpoint));
  }
  return {host, has_port ? std::stoi(port) : 0};
}

// --rdzv-conf "K=V,K=V" as torchrun's _parse_rendezvous_config reads it: items split at ',',
// each at its first '='; an empty item is skipped, one without '=' refused.
std::vector<std::pair<std::string, std::string>> ConfItems(const std::string& conf) {
  std::vector<std::pair<std::string, std::string>> items;
  size_t start = 0;
  while (start <= conf.size()) {
    size_t end = conf.find(',', start);
    if (end == std::string::npos) end = conf.size();
    const std::string item = conf.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(
          fmt::format("--rdzv-conf {}: the item '{}' is not KEY=VALUE (torchrun reads K1=V1,K2=V2)",
                      conf, item));
    }
    items.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return items;
}

// --rdzv-conf's `key` in seconds, `fallback` when not given: above 0, or 0 too where
// `zero_allowed`. The error names the key, the value and `fallback_said` (the default).
double ConfSeconds(const TorchrunRendezvous& rdzv, const std::string& key, double fallback,
                   bool zero_allowed, const std::string& fallback_said) {
  double seconds = fallback;
  for (const auto& [name, value] : ConfItems(rdzv.conf)) {
    if (name != key) continue;
    char* end = nullptr;
    seconds = std::strtod(value.c_str(), &end);
    const bool in_range = zero_allowed ? seconds >= 0 : seconds > 0;
    if (value.empty() || *end != '\0' || !in_range || seconds > 1e7) {
      throw UsageError(fmt::format("--rdzv-conf {}={}: expected seconds {} ({})", key, value,
                                   zero_allowed ? ">= 0" : "> 0", fallback_said));
    }
  }
  return seconds;
}

// The keys dtrain reads; the others are said not to be used.
bool UsedKey(const std::string& key) {
  return key == "join_timeout" || key == "last_call_timeout";
}

}  // namespace

double JoinTimeoutS(const TorchrunRendezvous& rdzv) {
  return ConfSeconds(rdzv, "join_timeout", kJoinTimeoutS, /*zero_allowed=*/false,
                     fmt::format("torchrun's default is {:g}", kJoinTimeoutS));
}

double LastCallTimeoutS(const TorchrunRendezvous& rdzv) {
  return ConfSeconds(rdzv, "last_call_timeout", 0, /*zero_allowed=*/true,
                     "0, dtrain's default, starts at once");
}

int TorchrunRendezvousPort(const TorchrunRendezvous& rdzv, int master_port, const ClusterSpec& spec,
                           std::vector<std::string>& notes) {
  if (rdzv.backend == "etcd" || rdzv.backend == "etcd-v2") {
    notes.push_back(fmt::format(
        "--rdzv-backend {}: no etcd server is contacted; dtrain hosts the job's rendezvous "
        "itself (a TCPStore on the first node, as torchrun's c10d backend)",
        rdzv.backend));
  }
  std::vector<std::string> unused_conf;
  for (const auto& [key, value] : ConfItems(rdzv.conf)) {
    if (!UsedKey(key)) unused_conf.push_back(key + "=" + value);
  }
  if (!unused_conf.empty()) {
    notes.push_back(
        fmt::format("--rdzv-conf {} {} not used: dtrain starts every rank itself (join_timeout and "
                    "last_call_timeout are: how long a job short of nodes waits for one to return)",
                    fmt::join(unused_conf, ","), unused_conf.size() > 1 ? "are" : "is"));
  }
  if (rdzv.standalone) {
    std::vector<std::string> unused;
    if (!rdzv.endpoint.empty()) unused.push_back("--rdzv-endpoint " + rdzv.endpoint);
    if (!rdzv.id.empty()) unused.push_back("--rdzv-id " + rdzv.id);
    if (!unused.empty()) {
      notes.push_back(fmt::format(
          "{}: --standalone picks its own rendezvous on this machine, as torchrun's does",
          NotUsed(unused)));
    }
    return 0;
  }
  if (rdzv.endpoint.empty()) return 0;
  // Named, not a structured binding: C++17 lets no lambda capture one (clang refuses it).
  const std::pair<std::string, int> endpoint = SplitEndpoint(rdzv.endpoint);
  const std::string& host = endpoint.first;
  const int port = endpoint.second;
  if (master_port > 0 && port > 0 && port != master_port) {
    throw UsageError(
        fmt::format("--rdzv-endpoint {} and --master-port {} name two ports; give one of them",
                    rdzv.endpoint, master_port));
  }
  auto is = [&](const NodeSpec& node) {
    return host == node.host || host == node.address ||
           (IsThisMachine(host) && IsThisMachine(node.address));
  };
  const NodeSpec& first = spec.nodes.front();
  if (spec.transport != TransportKind::kSlurm && !is(first)) {
    const bool listed = std::any_of(spec.nodes.begin(), spec.nodes.end(), is);
    notes.push_back(fmt::format(
        "--rdzv-endpoint {}: the rendezvous is on the first node, {} ({}), where dtrain hosts "
        "the job's store, not on {}{}",
        rdzv.endpoint, first.host, first.address, host,
        listed ? "; list it first to have it there" : ", which is not one of the job's nodes"));
  }
  return port;
}

}  // namespace dtrain
