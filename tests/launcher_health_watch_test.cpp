// The health watch's own rules, with a check function whose answers the test scripts: when a
// finding is news (after a check before the attempt, or against the first round's baseline),
// that one node is reported once, and the end of the attempt cuts a round short.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "launcher/error.h"
#include "launcher/health_watch.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using Findings = std::map<std::string, std::string>;

// Answers round i with rounds[i] (the last one from then on); counts the calls.
struct ScriptedCheck {
  std::vector<Findings> rounds;
  std::atomic<int> calls{0};
  NodeHealthCheck Function() {
    return [this](const ClusterSpec&, bool count_unreached, const std::function<bool()>&) {
      EXPECT_FALSE(count_unreached) << "while the job runs, reachability is the node timeout's";
      const int i = calls++;
      return rounds[std::min<size_t>(i, rounds.size() - 1)];
    };
  }
};

std::optional<UnfitNode> WaitForUnfit(HealthWatch& watch, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (auto unfit = watch.Take()) return unfit;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

TEST(HealthWatch, AfterACheckBeforeTheAttemptAnyFindingIsNews) {
  ScriptedCheck check;
  check.rounds = {{}, {{"node1", "Xid 79"}}};
  HealthWatch watch(check.Function(), ClusterSpec{}, 0.02, /*checked=*/true);
  const std::optional<UnfitNode> unfit = WaitForUnfit(watch, 5);
  ASSERT_TRUE(unfit);
  EXPECT_EQ(unfit->host, "node1");
  EXPECT_EQ(unfit->why, "Xid 79");
  EXPECT_EQ(check.calls.load(), 2);  // the first round was fit; the watch stopped after finding
  EXPECT_FALSE(watch.Take()) << "reported once";
}

TEST(HealthWatch, UncheckedNodesAreJudgedAgainstTheFirstRound) {
  ScriptedCheck check;
  // node2 was already unfit when the attempt began: not news until its reason changes.
  check.rounds = {{{"node2", "Xid 79, once this boot"}},
                  {{"node2", "Xid 79, once this boot"}},
                  {{"node2", "Xid 79, once this boot"}},
                  {{"node2", "Xid 79, twice this boot"}}};
  HealthWatch watch(check.Function(), ClusterSpec{}, 0.02, /*checked=*/false);
  const std::optional<UnfitNode> unfit = WaitForUnfit(watch, 5);
  ASSERT_TRUE(unfit);
  EXPECT_EQ(unfit->why, "Xid 79, twice this boot");
  EXPECT_EQ(check.calls.load(), 4);
}

TEST(HealthWatch, WarningsArePassedOnAsTheyComeAndStopNothing) {
  std::atomic<int> calls{0};
  NodeHealthCheck check = [&](const ClusterSpec&, bool, const std::function<bool()>&) {
    NodeHealthFindings found;
    const int i = calls++;
    if (i == 1) found.warnings.emplace("node1", "node node1: link errors grew");
    if (i == 2) found.warnings.emplace("node2", "node node2: link errors grew");
    return found;
  };
  HealthWatch watch(check, ClusterSpec{}, 0.02, /*checked=*/true);
  std::vector<NodeWarning> warnings;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while ((warnings.size() < 2 || calls < 5) && Clock::now() < until) {
    for (NodeWarning& w : watch.TakeWarnings()) warnings.push_back(std::move(w));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].host, "node1");
  EXPECT_EQ(warnings[0].what, "node node1: link errors grew");
  EXPECT_EQ(warnings[1].host, "node2");
  EXPECT_LE(warnings[0].found_after_s, warnings[1].found_after_s);
  EXPECT_GE(calls.load(), 5) << "the watch goes on after a warning";
  EXPECT_FALSE(watch.Take()) << "a warning is no reason to stop the job";
  EXPECT_TRUE(watch.TakeWarnings().empty()) << "each comes once";
}

// What a WatchFor::kReturns watch reports within 5 s (polled), nullopt if nothing.
std::optional<std::string> WaitForReturned(HealthWatch& watch) {
  std::optional<std::string> back;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (!back && Clock::now() < until) {
    back = watch.TakeReturned();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return back;
}

// Quarantined nodes are probed with unreachable ones counted unfit; the first to pass two rounds
// in a row is reported once. A round whose check could not run passes nobody.
TEST(HealthWatch, AQuarantinedNodeReturnsAfterTwoFitRoundsInARow) {
  std::atomic<int> calls{0};
  NodeHealthCheck check = [&](const ClusterSpec&, bool count_unreached,
                              const std::function<bool()>&) {
    EXPECT_TRUE(count_unreached) << "a quarantined node that cannot be reached is not back";
    const int i = calls++;
    if (i == 2) throw Error("no transport");
    NodeHealthFindings found;
    if (i == 0) found.unfit["node1"] = "could not be reached";  // then fit, but round 2 failed
    if (i < 6) found.unfit["node2"] = "Xid 79";
    return found;
  };
  ClusterSpec quarantined;
  quarantined.nodes.resize(2);
  quarantined.nodes[0].host = "node1";
  quarantined.nodes[1].host = "node2";
  HealthWatch watch(check, quarantined, 0.02, /*checked=*/true, WatchFor::kReturns);
  const std::optional<std::string> back = WaitForReturned(watch);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "node1");
  EXPECT_EQ(calls.load(), 5) << "rounds 1 and 3 were not in a row (round 2 failed); 3 and 4 were";
  EXPECT_FALSE(watch.TakeReturned()) << "reported once";
  EXPECT_FALSE(watch.Take()) << "nothing of the attempt's nodes";
}

// The nodes of the job that a returning node is tested with are witnesses: in the check (its
// peer test), never the node that returns, and at most kReturnWitnesses of them.
TEST(HealthWatch, AReturningNodeIsCheckedWithWitnessesThatNeverReturn) {
  ClusterSpec job;
  job.nodes.resize(6);
  for (int i = 0; i < 6; ++i) job.nodes[i].host = "node" + std::to_string(i);
  const ClusterSpec watched = ReturnWatchNodes(job, {4}, {0, 4, 1, 2, 3, 5});
  ASSERT_EQ(watched.nodes.size(), 1 + kReturnWitnesses);
  EXPECT_EQ(watched.nodes[0].host, "node4");
  EXPECT_FALSE(watched.nodes[0].witness);
  for (size_t i = 1; i < watched.nodes.size(); ++i) {
    EXPECT_EQ(watched.nodes[i].host, "node" + std::to_string(i - 1)) << "the first, node4 aside";
    EXPECT_TRUE(watched.nodes[i].witness);
  }
  // Every node fit, every round: only node4 may return, however many rounds the witnesses pass.
  std::atomic<int> calls{0};
  std::atomic<size_t> checked{0};
  NodeHealthCheck check = [&](const ClusterSpec& nodes, bool, const std::function<bool()>&) {
    checked = nodes.nodes.size();
    ++calls;
    return calls.load() < 4 ? Findings{{"node4", "cannot connect with node0, node1, node2"}}
                            : Findings{};
  };
  HealthWatch watch(check, watched, 0.02, /*checked=*/true, WatchFor::kReturns);
  const std::optional<std::string> back = WaitForReturned(watch);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "node4") << "a witness passed every round and was never reported";
  EXPECT_EQ(calls.load(), 5);
  EXPECT_EQ(checked.load(), watched.nodes.size()) << "the witnesses are in the check";
}

// Runs a watch whose rounds each take `round_s`, every `interval_s`, until 4 rounds began; the
// rest between the end of each round and the start of the next.
std::vector<double> RestsBetweenRounds(double round_s, double interval_s) {
  std::mutex mutex;
  std::vector<Clock::time_point> starts, ends;
  NodeHealthCheck slow = [&](const ClusterSpec&, bool, const std::function<bool()>& cancelled) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      starts.push_back(Clock::now());
    }
    const auto until = Clock::now() + std::chrono::duration<double>(round_s);
    while (!cancelled() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard<std::mutex> lock(mutex);
    ends.push_back(Clock::now());
    return Findings{};
  };
  std::vector<double> rests;
  HealthWatch watch(slow, ClusterSpec{}, interval_s, /*checked=*/false);
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (starts.size() >= 4) {
        for (size_t i = 1; i < 4; ++i)
          rests.push_back(std::chrono::duration<double>(starts[i] - ends[i - 1]).count());
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return rests;
}

// Every rest between 4 rounds of `round_s` every `interval_s` lies between `low` and `high`.
void ExpectRestsBetweenRounds(double round_s, double interval_s, double low, double high) {
  const std::vector<double> rests = RestsBetweenRounds(round_s, interval_s);
  ASSERT_EQ(rests.size(), 3u);
  for (double rest : rests) {
    EXPECT_GT(rest, low) << "a round began " << rest << " s after the last one ended";
    EXPECT_LT(rest, high) << "a round began " << rest << " s after the last one ended";
  }
}

// A round that takes 0.6 s of a 1 s interval is followed 0.4 s after its end, not 1 s: rounds
// start every interval, so a fault is found within the interval and one round (the launch's
// promise), not the interval and two.
TEST(HealthWatch, RoundsStartEveryIntervalHoweverLongTheyTake) {
  ExpectRestsBetweenRounds(0.6, 1.0, 0.2, 0.75);
}

// A round of 0.6 s in an interval of 0.4 s is followed by a quarter of the interval at rest
// (0.1 s), never by the next at once.
TEST(HealthWatch, ARoundLongerThanTheIntervalIsFollowedByARest) {
  ExpectRestsBetweenRounds(0.6, 0.4, 0.08, 0.35);
}

TEST(HealthWatch, TheEndOfTheAttemptCutsARoundShort) {
  std::atomic<bool> started{false};
  NodeHealthCheck stuck = [&](const ClusterSpec&, bool, const std::function<bool()>& cancelled) {
    started = true;
    while (!cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return Findings{{"node0", "what a cut-short round saw"}};
  };
  auto watch = std::make_unique<HealthWatch>(stuck, ClusterSpec{}, 0.01, /*checked=*/true);
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (!started && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(started);
  EXPECT_FALSE(watch->Take()) << "a round under way has nothing to say yet";
  const auto stop = Clock::now();
  watch.reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - stop).count(), 1.0);
}

}  // namespace
}  // namespace dtrain
