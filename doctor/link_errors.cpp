// Link error counters -> how they grew between two readings -> the "link-errors" warning.
#include "doctor/link_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "doctor/check_support.h"

namespace dtrain {

namespace {

// Counters where any growth counts, with what it means.
const char* EventMeaning(const std::string& counter) {
  if (counter == "replay rollovers" || counter == "link_error_recovery" ||
      counter == "Recovery Errors") {
    return "retrained";
  }
  if (counter == "link_downed") return "went down and came back";
  if (counter == "AER nonfatal" || counter == "AER fatal") return "uncorrectable";
  return nullptr;
}

// How much a counting counter may grow between two readings `seconds` apart: DCGM's limits for
// NVLink (replay errors: 1; CRC errors: 100 a second), kLinkErrorsPerMinute for the others (over
// at least a minute).
double AllowedGrowth(const std::string& counter, double seconds) {
  if (counter == "Replay Errors") return 1;
  if (counter == "CRC Errors") return 100 * seconds;
  return kLinkErrorsPerMinute * std::max(1.0, seconds / 60);
}

const LinkCounter* Find(const std::vector<LinkCounter>& counters, const LinkCounter& like) {
  for (const LinkCounter& c : counters) {
    if (c.link == like.link && c.counter == like.counter) return &c;
  }
  return nullptr;
}

}  // namespace

std::vector<LinkCounter> LinkCounters(const NodeHealth& health) {
  std::vector<LinkCounter> out;
  for (const GpuHealth& g : health.smi.gpus) {
    const std::string link = fmt::format("GPU {} PCIe", g.index);
    if (g.pcie_replays >= 0) out.push_back({link, "replays", g.pcie_replays});
    if (g.pcie_replay_rollovers >= 0) {
      out.push_back({link, "replay rollovers", g.pcie_replay_rollovers});
    }
  }
  for (const NvlinkErrorCount& e : health.nvlink_errors) {
    if (e.counter == "Replay Errors" || e.counter == "Recovery Errors" ||
        e.counter == "CRC Errors") {
      out.push_back({fmt::format("GPU {} NVLink {}", e.gpu, e.link), e.counter, e.value});
    }
  }
  for (const InfinibandPort& port : health.ib_ports) {
    for (const auto& [counter, value] : port.counters) out.push_back({port.name, counter, value});
  }
  for (const NicPcieErrors& nic : health.nic_pcie_errors) {
    for (const auto& [kind, value] : nic.totals) {
      out.push_back({nic.nic + " PCIe", "AER " + kind, value});
    }
  }
  return out;
}

std::vector<LinkErrorGrowth> FlakyLinks(const std::vector<LinkCounter>& before,
                                        const std::vector<LinkCounter>& after, double seconds) {
  std::vector<LinkErrorGrowth> out;
  if (seconds <= 0) return out;
  for (const LinkCounter& now : after) {
    const LinkCounter* then = Find(before, now);
    if (!then || now.value <= then->value) continue;  // not read before, no growth, or a reset
    LinkErrorGrowth g;
    g.link = now.link;
    g.counter = now.counter;
    g.grown = now.value - then->value;
    g.per_minute = static_cast<double>(g.grown) * 60 / seconds;
    g.event = EventMeaning(now.counter) != nullptr;
    if (g.event || static_cast<double>(g.grown) > AllowedGrowth(now.counter, seconds)) {
      out.push_back(std::move(g));
    }
  }
  return out;
}

Finding FlakyLinkFinding(const std::string& host, const std::vector<LinkErrorGrowth>& growth,
                         double seconds, Severity events) {
  std::vector<std::string> items;
  Severity severity = Severity::kWarning;
  for (const LinkErrorGrowth& g : growth) {
    if (g.event) severity = events;
    if (g.event) {
      items.push_back(
          fmt::format("{} {} +{} ({})", g.link, g.counter, g.grown, EventMeaning(g.counter)));
    } else {
      items.push_back(fmt::format("{} {} +{} ({:.0f}/min)", g.link, g.counter, g.grown,
                                  std::round(g.per_minute)));
    }
  }
  return checks::Make(
      severity, "link-errors", "", {host},
      fmt::format("node {}: link errors grew in {:.0f} s: {}", host, std::max(1.0, seconds),
                  checks::Join(items, "; ")),
      "a link whose errors grow makes NCCL slow or time out: reseat or replace the cable, the "
      "transceiver or the card (for NVLink, the baseboard is the vendor's), or leave the node "
      "out until it is mended (limits in dtrain-doctor(1))");
}

std::optional<Finding> LinkErrorWatch::Update(const std::string& host,
                                              const std::vector<LinkCounter>& counters,
                                              double at_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto last = last_.find(host);
  if (last == last_.end()) {
    last_[host] = {at_s, counters};
    return std::nullopt;
  }
  const double seconds = at_s - last->second.at_s;
  std::vector<LinkErrorGrowth> growth = FlakyLinks(last->second.counters, counters, seconds);
  last->second = {at_s, counters};
  growth.erase(
      std::remove_if(growth.begin(), growth.end(),
                     [&](const LinkErrorGrowth& g) {
                       return !reported_.insert(host + "\n" + g.link + "\n" + g.counter).second;
                     }),
      growth.end());
  if (growth.empty()) return std::nullopt;
  return FlakyLinkFinding(host, growth, seconds, events_);
}

std::vector<Finding> LinkErrorWatch::Update(const std::vector<NodeFacts>& nodes) {
  const double now_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::vector<Finding> out;
  for (const NodeFacts& node : nodes) {
    if (!node.reached) continue;
    if (std::optional<Finding> f = Update(node.host, LinkCounters(node.health), now_s)) {
      out.push_back(std::move(*f));
    }
  }
  return out;
}

}  // namespace dtrain
