#include "launcher/timeline/trace_diff.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

// How many names of each side the text lists.
constexpr size_t kListed = 8;

double PerStep(const OpTotal& total, int steps) {
  return steps > 0 ? total.total_us / steps : 0;
}

std::string Short(const std::string& name) {
  return name.size() > 70 ? name.substr(0, 67) + "..." : name;
}

std::string CountText(const OpChange& c, int steps_before, int steps_after) {
  auto per_step = [](int64_t count, int steps) {
    const double n = steps > 0 ? static_cast<double>(count) / steps : 0;
    return n == std::floor(n) ? fmt::format("{:.0f}", n) : fmt::format("{:.1f}", n);
  };
  return per_step(c.before.count, steps_before) + " -> " + per_step(c.after.count, steps_after);
}

std::string ChangeList(const TraceDiff& diff, bool gpu) {
  std::string out;
  size_t listed = 0;
  for (const OpChange& c : diff.changes) {
    if (c.gpu != gpu || listed == kListed) continue;
    if (std::abs(c.delta_per_step_us()) < 0.0005) break;  // the rest did not change
    const char* what = c.before.count == 0 ? "  (new)" : c.after.count == 0 ? "  (gone)" : "";
    out += fmt::format("  {:>+10.3f} ms  {:>13}  {}{}\n", c.delta_per_step_us() / 1000.0,
                       CountText(c, diff.steps_before, diff.steps_after), Short(c.name), what);
    ++listed;
  }
  return out.empty() ? "  (none changed)\n" : out;
}

}  // namespace

TraceDiff DiffRankOps(const RankOps& before, const RankOps& after, const std::string& against) {
  TraceDiff diff;
  diff.against = against;
  diff.rank_before = before.rank;
  diff.rank_after = after.rank;
  diff.steps_before = before.steps;
  diff.steps_after = after.steps;
  diff.step_ms_before = before.steps > 0 ? before.steps_us / before.steps / 1000.0 : 0;
  diff.step_ms_after = after.steps > 0 ? after.steps_us / after.steps / 1000.0 : 0;
  for (const bool gpu : {true, false}) {
    const auto& was = gpu ? before.gpu : before.cpu;
    const auto& now = gpu ? after.gpu : after.cpu;
    std::set<std::string> names;
    for (const auto& [name, unused] : was) names.insert(name);
    for (const auto& [name, unused] : now) names.insert(name);
    for (const std::string& name : names) {
      OpChange c;
      c.name = name;
      c.gpu = gpu;
      if (auto it = was.find(name); it != was.end()) c.before = it->second;
      if (auto it = now.find(name); it != now.end()) c.after = it->second;
      c.before_per_step_us = PerStep(c.before, before.steps);
      c.after_per_step_us = PerStep(c.after, after.steps);
      // As HTA's ops_diff, by the count over the steps compared.
      if (c.before.count == 0) {
        ++diff.added;
      } else if (c.after.count == 0) {
        ++diff.deleted;
      } else if (c.after.count > c.before.count) {
        ++diff.increased;
      } else if (c.after.count < c.before.count) {
        ++diff.decreased;
      } else {
        ++diff.unchanged;
      }
      diff.changes.push_back(std::move(c));
    }
  }
  std::stable_sort(diff.changes.begin(), diff.changes.end(),
                   [](const OpChange& a, const OpChange& b) {
                     return std::abs(a.delta_per_step_us()) > std::abs(b.delta_per_step_us());
                   });
  return diff;
}

std::string FormatTraceDiff(const TraceDiff& diff) {
  std::string out = fmt::format(
      "Against {} (rank {} there, {} step(s); rank {} here, {} step(s); per step)\n", diff.against,
      diff.rank_before, diff.steps_before, diff.rank_after, diff.steps_after);
  const double change =
      diff.step_ms_before > 0
          ? 100.0 * (diff.step_ms_after - diff.step_ms_before) / diff.step_ms_before
          : 0;
  out += fmt::format("  step {:.2f} ms -> {:.2f} ms ({:+.1f}%)\n", diff.step_ms_before,
                     diff.step_ms_after, change);
  out += "  GPU kernels, copies and stream records whose time per step changed most:\n";
  out += ChangeList(diff, true);
  out += "  CPU operators whose time per step changed most (nested operators count in each):\n";
  out += ChangeList(diff, false);
  out += fmt::format(
      "  names: {} new, {} gone, {} run more often, {} less often, {} as often (over the steps "
      "compared)\n",
      diff.added, diff.deleted, diff.increased, diff.decreased, diff.unchanged);
  return out;
}

nlohmann::json TraceDiffJson(const TraceDiff& diff) {
  using nlohmann::json;
  json changes = json::array();
  for (const OpChange& c : diff.changes) {
    changes.push_back({{"name", c.name},
                       {"device", c.gpu ? "gpu" : "cpu"},
                       {"before_count", c.before.count},
                       {"after_count", c.after.count},
                       {"before_total_us", Round3(c.before.total_us)},
                       {"after_total_us", Round3(c.after.total_us)},
                       {"delta_per_step_us", Round3(c.delta_per_step_us())}});
  }
  return {{"against", diff.against},
          {"rank_before", diff.rank_before},
          {"rank_after", diff.rank_after},
          {"steps_before", diff.steps_before},
          {"steps_after", diff.steps_after},
          {"step_ms_before", Round3(diff.step_ms_before)},
          {"step_ms_after", Round3(diff.step_ms_after)},
          {"added", diff.added},
          {"deleted", diff.deleted},
          {"increased", diff.increased},
          {"decreased", diff.decreased},
          {"unchanged", diff.unchanged},
          {"changes", changes}};
}

}  // namespace dtrain
