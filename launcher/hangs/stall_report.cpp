// MakeStallReport reads top to bottom: who is stalled, where each rank is, who the others wait
// for (from dtrain-clip's heartbeats, else from Python stacks, else from the kernel), then the
// table and the full stacks.
#include "launcher/hangs/stall_report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/trace/heartbeat_vocabulary.h"

namespace dtrain {
namespace {

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

std::string Bytes(const std::string& bytes_text) {
  const double bytes = std::atof(bytes_text.c_str());
  if (bytes >= 1 << 20) return fmt::format("{:.0f} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:.0f} KiB", bytes / (1 << 10));
  return fmt::format("{:.0f} B", bytes);
}

// "ALLREDUCE #812 (gradients: gradient buffer 2, 24 MiB)"
std::string CollectiveName(const std::map<std::string, std::string>& hb) {
  std::string what = Get(hb, heartbeat::kCollectiveWhat);
  std::string detail = Get(hb, heartbeat::kCollectiveSet);
  if (!what.empty()) detail += (detail.empty() ? "" : ": ") + what;
  detail += (detail.empty() ? "" : ", ") + Bytes(Get(hb, heartbeat::kCollectiveBytes));
  return fmt::format("{} #{} ({})", Get(hb, heartbeat::kCollective),
                     Get(hb, heartbeat::kCollectiveSeq), detail);
}

bool Waiting(const RankView& r) {
  return r.facts && Get(r.facts->heartbeat, heartbeat::kCollectiveState) == heartbeat::kWaiting;
}

bool Stopped(const RankView& r) {
  const RankProcess* p = r.facts ? r.facts->main() : nullptr;
  return p && (p->state == 'T' || p->state == 't');
}

std::string KernelView(const RankProcess& p) {
  static const std::map<char, const char*> kStates = {{'R', "running"},
                                                      {'S', "sleeping"},
                                                      {'D', "in uninterruptible wait"},
                                                      {'T', "stopped"},
                                                      {'t', "stopped by a debugger"},
                                                      {'Z', "a zombie"},
                                                      {'I', "idle"}};
  auto state = kStates.find(p.state);
  std::string text = state == kStates.end() ? std::string(1, p.state) : state->second;
  if (!p.wchan.empty() && p.wchan != "0") text += " in " + p.wchan;
  return text;
}

// Where one rank is, in a few words.
std::string Where(const RankView& r) {
  if (r.ended) return "ended: " + r.exit;
  if (!r.facts || !r.facts->main()) return "not found on its node";
  const RankFacts& f = *r.facts;
  const RankProcess& p = *f.main();
  std::string where;
  if (!f.heartbeat.empty()) {
    const auto& hb = f.heartbeat;
    if (Waiting(r)) {
      where = "in " + CollectiveName(hb);
    } else {
      where =
          fmt::format("{} at step {}", Get(hb, heartbeat::kActivity), Get(hb, heartbeat::kStep));
      if (!Get(hb, heartbeat::kCollective).empty()) where += "; last in " + CollectiveName(hb);
    }
  } else if (!p.stack_lines.empty()) {
    where = InnermostFrame(p);
  }
  const std::string kernel = KernelView(p);
  return where.empty() ? kernel : where + " [" + kernel + "]";
}

// The ranks everybody else waits for, and one line saying so.
struct Verdict {
  std::vector<int> culprits;
  std::string summary;
};

std::string RanksWord(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", RankList(ranks));
}

// A heartbeat file is rewritten at least every 2 s while the rank's process runs: one older than
// this comes from a rank that stopped (its writer thread with it), whatever the file still says.
constexpr double kLiveHeartbeatS = 5.0;

bool LiveWaiter(const RankView& r) {
  return Waiting(r) && !Stopped(r) && r.facts->heartbeat_age_s >= 0 &&
         r.facts->heartbeat_age_s <= kLiveHeartbeatS;
}

// The ranks a waiting rank found missing from its collective in the rendezvous store.
std::vector<int> MissingOf(const RankView& r) {
  std::vector<int> missing;
  const std::string text = Get(r.facts->heartbeat, heartbeat::kMissing);
  for (size_t at = 0; at < text.size();) {
    missing.push_back(std::atoi(text.c_str() + at));
    at = text.find(',', at);
    at = at == std::string::npos ? text.size() : at + 1;
  }
  return missing;
}

// "; rank 2 on node2 has not entered it: last activity DATA at step 406, 312 s ago".
std::string NotEntered(const std::vector<RankView>& ranks, int m) {
  auto r = std::find_if(ranks.begin(), ranks.end(), [m](const RankView& x) { return x.rank == m; });
  if (r == ranks.end()) return "";
  std::string text = fmt::format("; rank {} on {} has not entered it", m, r->host);
  if (r->facts && !r->facts->heartbeat.empty()) {
    const auto& mhb = r->facts->heartbeat;
    text += fmt::format(": last activity {} at step {}, {:.0f} s ago",
                        Get(mhb, heartbeat::kActivity), Get(mhb, heartbeat::kStep), r->idle_s);
  }
  if (Stopped(*r)) text += " (its process is stopped)";
  return text;
}

std::string WaitVerb(const std::vector<int>& ranks) {
  return ranks.size() == 1 ? "waits" : "wait";
}

// dtrain-clip, from what live waiters found in the store: each waits for the ranks missing from
// its collective; those that are not themselves live waiters (stopped, stuck outside any
// collective) are the ones the job waits for. Waiting chains (2 waits for 0, which waits for 1)
// end there.
bool FromWaitGraph(const std::vector<RankView>& ranks, Verdict& v) {
  std::set<int> live_waiters;
  for (const RankView& r : ranks)
    if (LiveWaiter(r)) live_waiters.insert(r.rank);
  std::vector<int> sinks;
  const RankView* first = nullptr;
  std::vector<int> waiting;
  for (const RankView& r : ranks) {
    if (!live_waiters.count(r.rank)) continue;
    bool waits_on_sink = false;
    for (int m : MissingOf(r)) {
      if (live_waiters.count(m)) continue;
      waits_on_sink = true;
      if (std::find(sinks.begin(), sinks.end(), m) == sinks.end()) sinks.push_back(m);
    }
    if (waits_on_sink) {
      if (!first) first = &r;
      waiting.push_back(r.rank);
    }
  }
  if (sinks.empty()) return false;
  std::sort(sinks.begin(), sinks.end());
  v.summary = fmt::format("{} {} in {}", RanksWord(waiting), WaitVerb(waiting),
                          CollectiveName(first->facts->heartbeat));
  for (int m : sinks) v.summary += NotEntered(ranks, m);
  v.culprits = sinks;
  return true;
}

// dtrain-clip, before any store inspection: the largest group of live ranks waiting in one
// collective; the ranks outside it are the ones it waits for.
bool FromHeartbeats(const std::vector<RankView>& ranks, Verdict& v) {
  if (FromWaitGraph(ranks, v)) return true;
  std::map<std::string, std::vector<const RankView*>> groups;
  for (const RankView& r : ranks) {
    if (LiveWaiter(r)) {
      groups[Get(r.facts->heartbeat, heartbeat::kCollectiveSet) + "#" +
             Get(r.facts->heartbeat, heartbeat::kCollectiveSeq)]
          .push_back(&r);
    }
  }
  if (groups.empty()) return false;
  auto biggest = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.second.size() < b.second.size();
  });
  const auto& waiters = biggest->second;
  std::vector<int> waiting;
  for (const RankView* r : waiters) waiting.push_back(r->rank);
  std::vector<int> missing;
  for (const RankView& r : ranks) {
    if (!r.ended && std::find(waiting.begin(), waiting.end(), r.rank) == waiting.end())
      missing.push_back(r.rank);
  }
  const auto& hb = waiters.front()->facts->heartbeat;
  v.summary = fmt::format("{} {} in {}", RanksWord(waiting), WaitVerb(waiting), CollectiveName(hb));
  if (missing.empty()) {
    v.summary += "; every rank has entered it (a rank may have stopped inside it)";
    for (const RankView& r : ranks)
      if (Stopped(r)) v.culprits.push_back(r.rank);
    return !v.culprits.empty();
  }
  v.culprits = missing;
  for (int m : missing) v.summary += NotEntered(ranks, m);
  return true;
}

// Python: ranks grouped by their innermost frame; a rank outside the groups that sit in
// torch.distributed (or, failing that, in the smallest group) is the odd one out.
bool FromStacks(const std::vector<RankView>& ranks, Verdict& v) {
  std::map<std::string, std::vector<int>> groups;
  for (const RankView& r : ranks) {
    const RankProcess* p = r.facts ? r.facts->main() : nullptr;
    if (!p || p->stack_lines.empty()) continue;
    groups[InnermostFrame(*p)].push_back(r.rank);
  }
  if (groups.size() < 2) {
    if (groups.size() == 1)
      v.summary = fmt::format("{} in {}", RanksWord(groups.begin()->second), groups.begin()->first);
    return false;
  }
  auto in_collective = [](const std::string& frame) {
    return frame.find("distributed") != std::string::npos ||
           frame.find("all_reduce") != std::string::npos ||
           frame.find("barrier") != std::string::npos || frame.find("wait (") == 0;
  };
  std::vector<std::pair<std::string, std::vector<int>>> ordered(groups.begin(), groups.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  size_t waiting_groups = 0;
  for (const auto& g : ordered) waiting_groups += in_collective(g.first);
  for (const auto& g : ordered) {
    const bool odd = waiting_groups > 0 && waiting_groups < ordered.size()
                         ? !in_collective(g.first)
                         : g.second.size() == ordered.back().second.size();
    if (odd) v.culprits.insert(v.culprits.end(), g.second.begin(), g.second.end());
  }
  std::vector<std::string> parts;
  for (const auto& [frame, members] : ordered) {
    parts.push_back(members.size() > 1 ? fmt::format("{} ranks ({}) in {}", members.size(),
                                                     RankList(members), frame)
                                       : fmt::format("rank {} in {}", members.front(), frame));
  }
  v.summary = fmt::format("{}", fmt::join(parts, "; "));
  std::sort(v.culprits.begin(), v.culprits.end());
  return !v.culprits.empty();
}

// The kernel: stopped processes first, else the rank idle longest.
void FromKernel(const std::vector<RankView>& ranks, Verdict& v) {
  for (const RankView& r : ranks)
    if (Stopped(r)) v.culprits.push_back(r.rank);
  if (v.culprits.empty()) {
    const RankView* longest = nullptr;
    for (const RankView& r : ranks)
      if (!r.ended && (!longest || r.idle_s > longest->idle_s)) longest = &r;
    if (longest) v.culprits.push_back(longest->rank);
  }
  if (v.summary.empty() && !v.culprits.empty()) {
    std::vector<std::string> parts;
    for (int c : v.culprits) {
      auto r =
          std::find_if(ranks.begin(), ranks.end(), [c](const RankView& x) { return x.rank == c; });
      parts.push_back(fmt::format("rank {} on {}: {}, no progress for {:.0f} s", c, r->host,
                                  Where(*r), r->idle_s));
    }
    v.summary = fmt::format("{}", fmt::join(parts, "; "));
  }
}

std::string Clip(std::string text, size_t width) {
  if (text.size() > width) text = text.substr(0, width - 3) + "...";
  return text;
}

}  // namespace

std::string RankList(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ","));
}

std::string InnermostFrame(const RankProcess& p) {
  // py-spy: "Process ...", "Python v...", "", "Thread N (idle): \"MainThread\"", "    frame", ...
  // The main thread is listed first.
  for (const std::string& line : p.stack_lines) {
    if (line.rfind("    ", 0) != 0) continue;
    std::string frame = line.substr(line.find_first_not_of(' '));
    const size_t open = frame.rfind('(');
    if (open != std::string::npos) {
      const std::string where = frame.substr(open + 1, frame.size() - open - 2);
      auto source = p.frame_sources.find(where);
      if (source != p.frame_sources.end() && !source->second.empty())
        frame += " `" + source->second + "`";
    }
    return frame;
  }
  return "";
}

StallReport MakeStallReport(const std::vector<RankView>& ranks, double timeout_s,
                            const std::map<std::string, std::string>& node_errors) {
  StallReport report;
  for (const RankView& r : ranks)
    if (!r.ended && r.idle_s >= timeout_s) report.stalled.push_back(r.rank);

  Verdict verdict;
  if (!FromHeartbeats(ranks, verdict) && !FromStacks(ranks, verdict)) FromKernel(ranks, verdict);
  report.culprits = verdict.culprits;
  report.summary = verdict.summary;

  std::string& t = report.text;
  t += fmt::format("stall: {} made no progress for {:g} s or more; the job waits for {}\n",
                   RanksWord(report.stalled), timeout_s, RanksWord(report.culprits));
  t += report.summary + "\n";
  for (const auto& [host, error] : node_errors)
    t += fmt::format("node {}: not probed: {}\n", host, error);
  t += fmt::format("{:<5} {:<12} {:>8} {:>7}  {:<50} {}\n", "rank", "node", "pid", "idle_s",
                   "where", "last line");
  for (const RankView& r : ranks) {
    const RankProcess* p = r.facts ? r.facts->main() : nullptr;
    t += fmt::format("{:<5} {:<12} {:>8} {:>7.0f}  {:<50} {}\n", r.rank, Clip(r.host, 12),
                     p ? std::to_string(p->pid) : "-", r.idle_s, Clip(Where(r), 50),
                     Clip(r.last_line, 100));
  }
  for (const RankView& r : ranks) {
    const RankProcess* p = r.facts ? r.facts->main() : nullptr;
    if (!p) continue;
    if (!p->stack_lines.empty()) {
      t += fmt::format("\nrank {} on {} (pid {}): Python stack (py-spy)\n", r.rank, r.host, p->pid);
      for (const std::string& line : p->stack_lines) {
        if (line.rfind("Process ", 0) == 0 || line.rfind("Python v", 0) == 0 || line.empty())
          continue;
        t += "  " + line + "\n";
      }
    } else if (!p->stack_error.empty()) {
      t += fmt::format("\nrank {} on {} (pid {}): no Python stack: {}\n", r.rank, r.host, p->pid,
                       p->stack_error);
    }
  }
  return report;
}

}  // namespace dtrain
