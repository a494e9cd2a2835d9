// The round's barrier (registration.py's WorkerStateRegistry): every rank of the round records
// one state, ready (it asked for its next place), succeeded or failed (it ended); the last one
// settles the round. A rank that fails after it asked counts as failed.
#include "launcher/horovod_elastic_rounds.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/rank_plan.h"

namespace dtrain {

std::string HorovodSlotInfo::Response() const {
  return fmt::format("{},{},{},{},{},{}", rank, size, local_rank, local_size, cross_rank,
                     cross_size);
}

HorovodElasticRounds::HorovodElasticRounds(const RankPlan& plan, int min_np, int reset_limit,
                                           int max_np, std::chrono::seconds wait)
    : min_np_(std::max(1, min_np)),
      reset_limit_(reset_limit),
      max_np_(std::max(0, max_np)),
      wait_(std::max(std::chrono::seconds(0), wait)) {
  for (const RankSlot& slot : plan.ranks) {
    Member m;
    auto machine = slot.env.find("HOROVOD_HOSTNAME");
    m.machine = machine != slot.env.end() ? machine->second : slot.host;
    m.host = slot.host;
    m.rank = slot.rank;
    m.local_rank = slot.local_rank;
    m.key = fmt::format("{}:{}", m.machine, m.local_rank);
    if (std::find(order_.begin(), order_.end(), m.machine) == order_.end())
      order_.push_back(m.machine);
    members_.push_back(std::move(m));
  }
  Assign();
}

void HorovodElasticRounds::Absent(const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Member& m : members_) {
    if (m.host != host) continue;
    m.in_round = false;
    order_.erase(std::remove(order_.begin(), order_.end(), m.machine), order_.end());
  }
  Assign();
}

void HorovodElasticRounds::Assign() {
  // hosts.get_host_assignments: hosts in assignment order, each host's slots in local rank order.
  std::map<std::string, std::vector<Member*>> on;
  for (Member& m : members_) {
    if (m.in_round) on[m.machine].push_back(&m);
  }
  std::vector<std::string> machines;
  for (const std::string& machine : order_) {
    if (on.count(machine)) machines.push_back(machine);
  }
  int size = 0;
  for (const auto& [machine, ms] : on) size += static_cast<int>(ms.size());
  std::map<int, int> cross_size;  // local rank -> hosts that have one
  for (const std::string& machine : machines) {
    for (size_t i = 0; i < on[machine].size(); ++i) ++cross_size[static_cast<int>(i)];
  }
  std::map<int, int> next_cross;
  int rank = 0;
  for (const std::string& machine : machines) {
    std::vector<Member*>& ms = on[machine];
    std::sort(ms.begin(), ms.end(),
              [](const Member* a, const Member* b) { return a->local_rank < b->local_rank; });
    for (size_t i = 0; i < ms.size(); ++i) {
      const int local = static_cast<int>(i);
      HorovodSlotInfo& s = ms[i]->slot;
      s.rank = rank++;
      s.size = size;
      s.local_rank = local;
      s.local_size = static_cast<int>(ms.size());
      s.cross_rank = next_cross[local]++;
      s.cross_size = cross_size[local];
    }
  }
  for (Member& m : members_) {
    if (!m.in_round) m.slot = HorovodSlotInfo{};
  }
}

bool HorovodElasticRounds::Ready(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto m =
      std::find_if(members_.begin(), members_.end(), [&](const Member& x) { return x.key == key; });
  if (m == members_.end()) return false;
  m->answer.reset();
  if (!m->in_round || verdict_ != Verdict::kRunning) {
    m->answer = HorovodSlotInfo{};
    return true;
  }
  if (m->state == State::kRunning) m->state = State::kReady;
  SettleIfDone();
  return true;
}

void HorovodElasticRounds::Ended(int rank, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = std::find_if(members_.begin(), members_.end(),
                        [&](const Member& x) { return x.rank == rank; });
  if (m == members_.end() || !m->in_round) return;
  if (m->state == State::kSucceeded || m->state == State::kFailed) return;
  m->state = ok ? State::kSucceeded : State::kFailed;
  if (!ok) last_failed_ = rank;
  SettleIfDone();
}

void HorovodElasticRounds::Fail(std::string why, int rank) {
  verdict_ = Verdict::kFailed;
  why_failed_ = std::move(why);
  blamed_rank_ = rank;
}

void HorovodElasticRounds::SettleIfDone() {
  if (verdict_ != Verdict::kRunning) return;
  int in_round = 0, ready = 0, succeeded = 0, failed = 0, joining = 0, staying_done = 0;
  for (const Member& m : members_) {
    if (!m.in_round) continue;
    ++in_round;
    ready += m.state == State::kReady;
    succeeded += m.state == State::kSucceeded;
    failed += m.state == State::kFailed;
    joining += m.joining;
    staying_done += !m.joining && m.state == State::kSucceeded;
  }
  if (joining > 0 && in_round > joining && staying_done == in_round - joining) {
    // The job finished before the ranks that rejoin were let in: it is done, and they leave.
    verdict_ = Verdict::kSucceeded;
  } else if (ready + succeeded + failed < in_round) {
    return;  // someone of the round is still at work
  } else if (succeeded == in_round) {
    verdict_ = Verdict::kSucceeded;
  } else if (succeeded > 0) {
    // driver.py stops the job once any rank finished: those still in it cannot go on alone.
    Fail(fmt::format("round {}: {} rank(s) finished while {} asked to go on or failed", round_,
                     succeeded, ready + failed),
         last_failed_);
  } else if (failed == in_round) {
    Fail(fmt::format("every rank of round {} failed", round_), last_failed_);
  } else {
    // Nodes leave: those with a rank that failed, and those taken out (Remove), which leave
    // whether or not a rank of theirs failed meanwhile.
    std::set<std::string> leaving, removed;
    for (const Member& m : members_) {
      if (m.in_round && m.removing) removed.insert(m.machine);
    }
    for (const Member& m : members_) {
      if (m.in_round && m.state == State::kFailed && !removed.count(m.machine))
        leaving.insert(m.machine);
    }
    if (leaving.empty() && removed.empty()) {
      // Every rank reset and none failed (a transient error, or hosts joined): the same ranks go
      // on, with those that joined; while waiting for nodes, once they bring --min-np.
      if (waiting_since_ && in_round < min_np_) return;
      waiting_since_.reset();
      waiting_for_.clear();
      ++round_;
      if (joining > 0) {
        ElasticRoundChange change;
        TakeJoined(change);
        ++resets_;
        Assign();
        change.round = round_;
        change.size = in_round;
        changes_.push_back(std::move(change));
      }
    } else {
      ElasticRoundChange change;
      int left = 0;
      for (Member& m : members_) {
        if (!m.in_round) continue;
        if (leaving.count(m.machine)) {
          if (std::find(change.left_hosts.begin(), change.left_hosts.end(), m.host) ==
              change.left_hosts.end())
            change.left_hosts.push_back(m.host);
          if (m.state == State::kFailed) change.failed_ranks.push_back(m.rank);
          change.left_ranks.push_back(m.rank);
          ++left;
        } else if (removed.count(m.machine)) {
          if (std::find(change.removed_hosts.begin(), change.removed_hosts.end(), m.host) ==
              change.removed_hosts.end())
            change.removed_hosts.push_back(m.host);
          change.removed_ranks.push_back(m.rank);
          ++left;
        }
      }
      std::vector<std::string> going = change.left_hosts;
      going.insert(going.end(), change.removed_hosts.begin(), change.removed_hosts.end());
      const int remaining = in_round - left;
      // Waiting needs a rank that stays and holds the job's state (a joiner has none yet).
      const bool may_wait = wait_.count() > 0 && remaining - joining > 0;
      if (remaining < min_np_ && !may_wait) {
        Fail(fmt::format("{} rank(s) would remain after node(s) {} left, fewer than --min-np {}",
                         remaining, fmt::join(going, ","), min_np_),
             last_failed_);
      } else if (reset_limit_ >= 0 && resets_ >= reset_limit_) {
        Fail(fmt::format("node(s) {} {} and the job was already reset {} time(s) "
                         "(--reset-limit {})",
                         fmt::join(going, ","), leaving.empty() ? "were taken out" : "failed",
                         resets_, reset_limit_),
             last_failed_);
      } else {
        for (Member& m : members_) {
          if (m.in_round && (leaving.count(m.machine) || removed.count(m.machine)))
            m.in_round = m.joining = m.removing = false;
        }
        for (const std::string& machine : leaving)
          order_.erase(std::remove(order_.begin(), order_.end(), machine), order_.end());
        for (const std::string& machine : removed)
          order_.erase(std::remove(order_.begin(), order_.end(), machine), order_.end());
        if (remaining < min_np_) {
          // Too few to go on: the nodes leave, the others wait (unanswered) for nodes to join.
          if (!waiting_since_) waiting_since_ = Clock::now();
          waiting_for_.insert(waiting_for_.end(), going.begin(), going.end());
          change.waiting = true;
          change.wait = wait_;
          change.round = round_ + 1;
          change.size = remaining;
          changes_.push_back(std::move(change));
        } else {
          waiting_since_.reset();
          waiting_for_.clear();
          TakeJoined(change);  // those that joined and did not fail go on with the others
          ++resets_;
          ++round_;
          Assign();
          change.round = round_;
          change.size = remaining;
          changes_.push_back(std::move(change));
        }
      }
    }
  }
  AnswerReady();
}

// Every rank that asked gets its place, or -1: a rank out of the job at once; the others once
// the round is settled (not while they wait for nodes), or the job is over.
void HorovodElasticRounds::AnswerReady() {
  const bool going_on = verdict_ == Verdict::kRunning;
  for (Member& m : members_) {
    if (m.state != State::kReady) continue;
    if (going_on && waiting_since_ && m.in_round) continue;  // waits for nodes to join
    m.answer = going_on && m.in_round ? m.slot : HorovodSlotInfo{};
    m.state = State::kRunning;
  }
}

void HorovodElasticRounds::CheckWait(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (verdict_ != Verdict::kRunning || !waiting_since_ || now - *waiting_since_ < wait_) return;
  int in_round = 0;
  for (const Member& m : members_) in_round += m.in_round && !m.joining;
  Fail(fmt::format("{} rank(s) remained after node(s) {} left, fewer than --min-np {}, and no "
                   "node joined within {} s (--elastic-timeout)",
                   in_round, fmt::join(waiting_for_, ","), min_np_, wait_.count()),
       last_failed_);
  AnswerReady();
}

std::optional<HorovodElasticRounds::Clock::time_point> HorovodElasticRounds::waiting_since() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_since_;
}

// The ranks that joined and are in the round being settled: said in `change`, no longer joining.
void HorovodElasticRounds::TakeJoined(ElasticRoundChange& change) {
  for (Member& m : members_) {
    if (!m.in_round || !m.joining) continue;
    if (std::find(change.joined_hosts.begin(), change.joined_hosts.end(), m.host) ==
        change.joined_hosts.end())
      change.joined_hosts.push_back(m.host);
    change.joined_ranks.push_back(m.rank);
    m.joining = false;
  }
}

std::string HorovodElasticRounds::WhyNotJoin(const std::string& host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return WhyNotJoinLocked(host);
}

std::string HorovodElasticRounds::WhyNotJoinLocked(const std::string& host) const {
  if (verdict_ != Verdict::kRunning) return "the job is over";
  if (reset_limit_ >= 0 && resets_ >= reset_limit_)
    return fmt::format("the job was already reset {} time(s) (--reset-limit {})", resets_,
                       reset_limit_);
  int in = 0, adds = 0;
  for (const Member& m : members_) {
    in += m.in_round;
    if (m.host != host) continue;
    if (m.in_round) return "node " + host + " is in the job";
    ++adds;
  }
  if (adds == 0) return "node " + host + " has no rank in the job";
  if (max_np_ > 0 && in + adds > max_np_)
    return fmt::format("the job has {} rank(s), and its {} would make more than --max-np {}", in,
                       adds, max_np_);
  return "";
}

std::string HorovodElasticRounds::Remove(const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  if (verdict_ != Verdict::kRunning) return "the job is over";
  bool any = false;
  for (Member& m : members_) {
    if (m.host != host || !m.in_round) continue;
    any = true;
    if (m.joining) {  // never started: it simply does not join
      m.in_round = m.joining = false;
      m.state = State::kRunning;
      m.answer.reset();
    } else {
      m.removing = true;
    }
  }
  if (!any) return "node " + host + " is not in the job";
  if (std::none_of(members_.begin(), members_.end(),
                   [&](const Member& m) { return m.host == host && m.in_round; })) {
    order_.erase(std::remove_if(order_.begin(), order_.end(),
                                [&](const std::string& machine) {
                                  return std::any_of(
                                      members_.begin(), members_.end(), [&](const Member& m) {
                                        return m.host == host && m.machine == machine;
                                      });
                                }),
                 order_.end());
  }
  SettleIfDone();
  return "";
}

std::string HorovodElasticRounds::Rejoin(const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::string why = WhyNotJoinLocked(host); !why.empty()) return why;
  for (Member& m : members_) {
    if (m.host != host) continue;
    m.in_round = m.joining = true;
    m.state = State::kReady;  // it starts once the round is settled, with its place
    m.answer.reset();
    if (std::find(order_.begin(), order_.end(), m.machine) == order_.end())
      order_.push_back(m.machine);
  }
  if (waiting_since_) SettleIfDone();  // the others asked already: settled once there are enough
  return "";
}

std::optional<HorovodSlotInfo> HorovodElasticRounds::Slot(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Member& m : members_) {
    if (m.rank == rank && m.in_round && !m.joining) return m.slot;
  }
  return std::nullopt;
}

std::string HorovodElasticRounds::CoordinatorKey() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Member& m : members_) {
    if (m.in_round && !m.joining && m.slot.rank == 0) return m.key;
  }
  return "";
}

std::optional<HorovodSlotInfo> HorovodElasticRounds::Answer(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Member& m : members_) {
    if (m.key == key) return m.answer;
  }
  return HorovodSlotInfo{};
}

std::map<std::string, int> HorovodElasticRounds::ScopeSizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int> sizes;
  for (const Member& m : members_) {
    if (!m.in_round) continue;
    sizes["global"] = m.slot.size;
    sizes["local_" + m.machine] = m.slot.local_size;
    sizes["cross_" + std::to_string(m.slot.local_rank)] = m.slot.cross_size;
  }
  return sizes;
}

int HorovodElasticRounds::round() const {
  std::lock_guard<std::mutex> lock(mu_);
  return round_;
}

HorovodElasticRounds::Verdict HorovodElasticRounds::verdict() const {
  std::lock_guard<std::mutex> lock(mu_);
  return verdict_;
}

std::string HorovodElasticRounds::why_failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_failed_;
}

int HorovodElasticRounds::blamed_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blamed_rank_;
}

std::vector<ElasticRoundChange> HorovodElasticRounds::TakeChanges() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(changes_, {});
}

}  // namespace dtrain
