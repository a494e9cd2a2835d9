#include "launcher/timeline/collective_arrivals.h"

#include <algorithm>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {

CollectiveArrivals MatchCollectives(std::map<int, std::vector<std::pair<uint32_t, double>>>& starts,
                                    const NameTable& names) {
  std::map<std::pair<uint32_t, int>, std::vector<std::pair<int, double>>> arrivals;
  for (auto& [rank, collectives] : starts) {
    std::sort(collectives.begin(), collectives.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    std::map<uint32_t, int> seen;
    for (const auto& [name, start] : collectives) {
      arrivals[{name, seen[name]++}].push_back({rank, start});
    }
  }
  CollectiveArrivals out;
  std::map<int, CollectiveStraggler> by_rank;
  std::vector<std::pair<double, CollectiveArrival>> ordered;
  for (const auto& [key, who] : arrivals) {
    if (who.size() < 2) continue;
    double first = who.front().second, last = who.front().second;
    int last_rank = who.front().first;
    for (const auto& [rank, ts] : who) {
      first = std::min(first, ts);
      if (ts > last) {
        last = ts;
        last_rank = rank;
      }
      by_rank[rank].rank = rank;
      by_rank[rank].collectives += 1;
    }
    const double late_ms = (last - first) / 1000.0;
    CollectiveStraggler& s = by_rank[last_rank];
    s.collectives_last += 1;
    s.total_late_ms += late_ms;
    s.max_late_ms = std::max(s.max_late_ms, late_ms);
    ordered.push_back({first, CollectiveArrival{names[key.first], key.second, last_rank, late_ms}});
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [ts, c] : ordered) out.collectives.push_back(std::move(c));
  for (const auto& [rank, s] : by_rank) {
    if (s.collectives_last > 0) out.stragglers.push_back(s);
  }
  std::sort(out.stragglers.begin(), out.stragglers.end(),
            [](const CollectiveStraggler& a, const CollectiveStraggler& b) {
              if (a.collectives_last != b.collectives_last) {
                return a.collectives_last > b.collectives_last;
              }
              return a.total_late_ms > b.total_late_ms;
            });
  return out;
}

std::string FormatCollectiveStragglers(const std::vector<CollectiveArrival>& collectives,
                                       const std::vector<CollectiveStraggler>& stragglers) {
  if (collectives.empty()) return "";
  std::string out =
      fmt::format("Stragglers: of {} collectives matched across ranks, the last to arrive\n",
                  collectives.size());
  for (const CollectiveStraggler& s : stragglers) {
    out += fmt::format(
        "  rank {}: last at {} of {} ({:.0f}%), {:.2f} ms late in all, "
        "{:.2f} ms at most\n",
        s.rank, s.collectives_last, s.collectives, Percent(s.collectives_last, s.collectives),
        s.total_late_ms, s.max_late_ms);
  }
  return out;
}

nlohmann::json CollectivesJson(const std::vector<CollectiveArrival>& collectives) {
  nlohmann::json out = nlohmann::json::array();
  for (const CollectiveArrival& c : collectives) {
    out.push_back({{"name", c.name},
                   {"occurrence", c.occurrence},
                   {"last_rank", c.last_rank},
                   {"late_by_ms", Round3(c.late_by_ms)}});
  }
  return out;
}

nlohmann::json CollectiveStragglersJson(const std::vector<CollectiveStraggler>& stragglers) {
  nlohmann::json out = nlohmann::json::array();
  for (const CollectiveStraggler& s : stragglers) {
    out.push_back({{"rank", s.rank},
                   {"collectives_last", s.collectives_last},
                   {"collectives", s.collectives},
                   {"total_late_ms", Round3(s.total_late_ms)},
                   {"max_late_ms", Round3(s.max_late_ms)}});
  }
  return out;
}

}  // namespace dtrain
