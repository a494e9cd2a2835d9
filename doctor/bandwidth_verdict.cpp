#include "doctor/bandwidth_verdict.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "doctor/check_support.h"

namespace dtrain {
namespace {

using checks::Make;

constexpr std::string_view kPrefix = "dtrain-bandwidth ";

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string Host(const std::vector<std::string>& hosts, int node) {
  return node >= 0 && node < static_cast<int>(hosts.size()) ? hosts[node]
                                                            : "#" + std::to_string(node);
}

std::string Gbs(double gbs) {
  return gbs >= 1 ? fmt::format("{:.2f} GB/s", gbs) : fmt::format("{:.1f} MB/s", gbs * 1000);
}

}  // namespace

std::vector<BandwidthFigure> ParseBandwidthLines(std::string_view text) {
  std::vector<BandwidthFigure> out;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.substr(0, kPrefix.size()) != kPrefix) continue;
    try {
      auto j = nlohmann::json::parse(line.substr(kPrefix.size()));
      BandwidthFigure f;
      f.kind = j.at("kind").get<std::string>();
      f.nodes = j.at("nodes").get<std::vector<int>>();
      f.ranks = j.at("ranks").get<int>();
      f.backend = j.at("backend").get<std::string>();
      f.bytes = j.at("bytes").get<int64_t>();
      f.seconds = j.at("seconds").get<double>();
      f.busbw_gbs = j.at("busbw_gbs").get<double>();
      out.push_back(std::move(f));
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("line {}: damaged bandwidth figure ({}): {}", line_no,
                                           e.what(), std::string(line)));
    }
  }
  return out;
}

BandwidthVerdict JudgeBandwidth(const std::vector<BandwidthFigure>& figures,
                                const std::vector<std::string>& hosts, double slow_fraction) {
  BandwidthVerdict v;
  // A pair measured again alone (it fell below half the reference while sharing its round with
  // the other pairs) is judged by that figure.
  std::map<std::pair<int, int>, const BandwidthFigure*> alone;
  for (const BandwidthFigure& f : figures) {
    if (f.kind == "pair_alone" && f.nodes.size() == 2) alone[{f.nodes[0], f.nodes[1]}] = &f;
  }
  std::vector<const BandwidthFigure*> pairs, inside;
  for (const BandwidthFigure& f : figures) {
    if (f.kind == "all") {
      v.findings.push_back(
          Make(Severity::kOk, "bandwidth", "", {},
               fmt::format("allreduce bus bandwidth of all {} node(s), {} rank(s): {} ({}, {} MiB)",
                           f.nodes.size(), f.ranks, Gbs(f.busbw_gbs), f.backend, f.bytes >> 20)));
    } else if (f.kind == "pair" && f.nodes.size() == 2) {
      auto again = alone.find({f.nodes[0], f.nodes[1]});
      pairs.push_back(again == alone.end() ? &f : again->second);
    } else if (f.kind == "node" && f.nodes.size() == 1) {
      inside.push_back(&f);
    }
  }

  // Pairs: each node's best partner sets the reference.
  std::map<int, std::vector<const BandwidthFigure*>> by_node;
  for (const BandwidthFigure* p : pairs) {
    by_node[p->nodes[0]].push_back(p);
    by_node[p->nodes[1]].push_back(p);
  }
  std::vector<double> best;
  for (const auto& [node, list] : by_node) {
    double b = 0;
    for (const BandwidthFigure* p : list) b = std::max(b, p->busbw_gbs);
    best.push_back(b);
  }
  v.reference_gbs = Median(best);
  const double limit = v.reference_gbs * slow_fraction;
  auto slow = [&](const BandwidthFigure* p) { return p->busbw_gbs < limit; };
  if (!pairs.empty()) {
    std::string list;
    for (const BandwidthFigure* p : pairs) {
      list += fmt::format("{}{}-{} {}", list.empty() ? "" : ", ", Host(hosts, p->nodes[0]),
                          Host(hosts, p->nodes[1]), Gbs(p->busbw_gbs));
    }
    v.findings.push_back(Make(Severity::kOk, "bandwidth", "", {},
                              fmt::format("node pairs (reference {}, slow below {}): {}",
                                          Gbs(v.reference_gbs), Gbs(limit), list)));
  }
  for (const auto& [node, list] : by_node) {
    if (list.size() < 2) continue;  // one partner cannot tell the node from the link
    if (!std::all_of(list.begin(), list.end(), slow)) continue;
    v.slow_nodes.push_back(node);
    std::vector<std::string> partners;
    for (const BandwidthFigure* p : list) {
      int other = p->nodes[0] == node ? p->nodes[1] : p->nodes[0];
      partners.push_back(fmt::format("{} with {}", Gbs(p->busbw_gbs), Host(hosts, other)));
    }
    v.findings.push_back(Make(
        Severity::kError, "bandwidth", "", {Host(hosts, node)},
        fmt::format("node {} is slow: every pair it is in falls below {:.0f}% of the reference {} "
                    "({})",
                    Host(hosts, node), slow_fraction * 100, Gbs(v.reference_gbs),
                    checks::Join(partners)),
        "check the node's network port, cable and switch port (link speed, errors: `ip -s link`, "
        "`ethtool`, `ibstat`); leave it out of the job (`dtrain doctor --exclude-bad`) until "
        "fixed"));
  }
  for (const BandwidthFigure* p : pairs) {
    if (!slow(p)) continue;
    const int a = p->nodes[0], b = p->nodes[1];
    auto is_slow_node = [&](int n) {
      return std::find(v.slow_nodes.begin(), v.slow_nodes.end(), n) != v.slow_nodes.end();
    };
    if (is_slow_node(a) || is_slow_node(b)) continue;
    v.slow_links.emplace_back(a, b);
    v.findings.push_back(Make(
        Severity::kError, "bandwidth", "", {Host(hosts, a), Host(hosts, b)},
        fmt::format("the link between {} and {} is slow: {} against a reference of {}, while both "
                    "nodes are fast with other partners",
                    Host(hosts, a), Host(hosts, b), Gbs(p->busbw_gbs), Gbs(v.reference_gbs)),
        "check the path between the two nodes (switch ports, cables, routing); the nodes "
        "themselves measured well"));
  }

  // Inside nodes: against the median of all nodes.
  std::vector<double> inside_values;
  for (const BandwidthFigure* f : inside) inside_values.push_back(f->busbw_gbs);
  const double inside_reference = Median(inside_values);
  for (const BandwidthFigure* f : inside) {
    if (inside.size() < 2 || f->busbw_gbs >= inside_reference * slow_fraction) continue;
    const int node = f->nodes[0];
    v.slow_inside.push_back(node);
    v.findings.push_back(
        Make(Severity::kError, "bandwidth", "", {Host(hosts, node)},
             fmt::format("node {}: its {} ranks reach each other at {}, below {:.0f}% of the other "
                         "nodes' median {}",
                         Host(hosts, node), f->ranks, Gbs(f->busbw_gbs), slow_fraction * 100,
                         Gbs(inside_reference)),
             "on GPU nodes, check NVLink (`nvidia-smi nvlink -s`, `nvidia-smi topo -m`) and the "
             "Fabric Manager; drain the node until fixed"));
  }
  for (const BandwidthFigure* f : inside) {
    if (std::find(v.slow_inside.begin(), v.slow_inside.end(), f->nodes[0]) != v.slow_inside.end())
      continue;
    v.findings.push_back(Make(Severity::kOk, "bandwidth", "", {Host(hosts, f->nodes[0])},
                              fmt::format("node {}: {} ranks inside the node: {}",
                                          Host(hosts, f->nodes[0]), f->ranks, Gbs(f->busbw_gbs))));
  }
  return v;
}

}  // namespace dtrain
