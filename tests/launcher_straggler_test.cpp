// The straggler watch's judgement (launcher/hangs/straggler_watch.h) on step times as dtrain-clip's
// heartbeat reports them: a rank busy on its own `factor` times the others' per step, while they
// wait for it, in two windows in a row is named once; one slow window, a rank nobody waits for,
// time between steps and a rank that joins are not.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>

#include "launcher/hangs/straggler_watch.h"

namespace dtrain {
namespace {

using Clock = StragglerWatch::Clock;

// Three ranks on nodes a, b, c, driven probe by probe: each probe, every rank takes `steps`
// steps; rank r is busy busy[r] s a step and waits for the slowest (blocked in collectives for
// the difference), as synchronous data-parallel ranks do.
class Job {
 public:
  explicit Job(double factor) : watch_(factor) {
    for (int r = 0; r < 3; ++r) samples_[r].host = std::string(1, static_cast<char>('a' + r));
    watch_.Observe(samples_, now_);
  }
  // `seconds` of training at the given busy times; returns the straggler named at its end.
  std::optional<Straggler> Run(double seconds, std::map<int, double> busy, long long steps = 10) {
    double slowest = 0;
    for (const auto& [r, b] : busy) slowest = std::max(slowest, b);
    for (auto& [r, s] : samples_) {
      s.step += steps;
      s.step_s += slowest * static_cast<double>(steps);
      s.waited_s += (slowest - busy.at(r)) * static_cast<double>(steps);
    }
    now_ += std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    watch_.Observe(samples_, now_);
    return watch_.Take();
  }
  std::map<int, StepSample>& samples() { return samples_; }
  StragglerWatch& watch() { return watch_; }
  Clock::time_point& now() { return now_; }

 private:
  StragglerWatch watch_;
  std::map<int, StepSample> samples_;
  Clock::time_point now_ = Clock::now();
};

TEST(StragglerWatch, RankSlowInTwoWindowsInARowIsNamedWithWhatItCosts) {
  Job job(1.5);
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.4}, {2, 0.4}}));
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.42}}));  // one slow window: not yet
  std::optional<Straggler> s = job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.42}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->host, "b");
  EXPECT_NEAR(s->busy_s, 0.9, 1e-9);
  EXPECT_NEAR(s->others_busy_s, 0.41, 1e-9);  // the median of 0.40 and 0.42
  EXPECT_NEAR(s->others_wait_s, 0.49, 1e-9);
  EXPECT_EQ(s->steps, 10);
  EXPECT_EQ(s->Describe(),
            "rank 1 on node b: busy 0.9 s a step against 0.41 s for the other ranks (2.2x) over "
            "the last 12 s (10 steps); they wait 0.49 s a step for it");
  // Named once while it stays slow; again after a window that found it well.
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}}));
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.4}, {2, 0.4}}));
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}}));
  s = job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 1);
}

TEST(StragglerWatch, SlowWindowsThatAreNotInARowNameNobody) {
  Job job(1.5);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}})) << i;
    EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.4}, {2, 0.4}})) << i;
  }
}

TEST(StragglerWatch, BelowTheFactorIsNotAStraggler) {
  Job job(1.5);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.59}, {2, 0.4}})) << i;
  Job strict(1.25);
  EXPECT_FALSE(strict.Run(12, {{0, 0.4}, {1, 0.59}, {2, 0.4}}));
  EXPECT_TRUE(strict.Run(12, {{0, 0.4}, {1, 0.59}, {2, 0.4}}));
}

TEST(StragglerWatch, ABusyRankNobodyWaitsForIsNotAStraggler) {
  // Rank 0's steps are longer (it does more per step), but the others never wait for it: their
  // step_s grows by their own busy time only.
  Job job(1.5);
  for (int i = 0; i < 3; ++i) {
    for (auto& [r, s] : job.samples()) {
      s.step += 10;
      s.step_s += (r == 0 ? 0.9 : 0.4) * 10;
    }
    job.now() += std::chrono::seconds(12);
    job.watch().Observe(job.samples(), job.now());
    EXPECT_FALSE(job.watch().Take()) << i;
  }
}

TEST(StragglerWatch, ShortWindowsAndWindowsOfFewStepsWaitForMore) {
  Job job(1.5);
  // An evaluation between steps: no step taken, nothing judged, however long (and its time is
  // not in step_s: the window that ends after it sees only the steps' time).
  job.now() += std::chrono::seconds(60);
  job.watch().Observe(job.samples(), job.now());
  EXPECT_FALSE(job.watch().Take());
  EXPECT_FALSE(job.Run(3, {{0, 0.4}, {1, 2.0}, {2, 0.4}}));  // 63 s, 10 steps: one strike
  // Windows shorter than kWindowSeconds are not judged: were they, the next would name it.
  EXPECT_FALSE(job.Run(3, {{0, 0.4}, {1, 2.0}, {2, 0.4}}));
  EXPECT_FALSE(job.Run(3, {{0, 0.4}, {1, 2.0}, {2, 0.4}}));
  EXPECT_FALSE(job.Run(3, {{0, 0.4}, {1, 2.0}, {2, 0.4}}));
  EXPECT_TRUE(job.Run(3, {{0, 0.4}, {1, 2.0}, {2, 0.4}}));  // 12 s: the second strike

  Job few(1.5);  // windows need kWindowSteps steps of every rank
  EXPECT_FALSE(few.Run(12, {{0, 0.4}, {1, 2.0}, {2, 0.4}}, 2));
  EXPECT_FALSE(few.Run(12, {{0, 0.4}, {1, 2.0}, {2, 0.4}}, 2));  // 4 steps: one strike
  EXPECT_FALSE(few.Run(12, {{0, 0.4}, {1, 2.0}, {2, 0.4}}, 2));
  EXPECT_TRUE(few.Run(12, {{0, 0.4}, {1, 2.0}, {2, 0.4}}, 2));
}

TEST(StragglerWatch, ARankThatLeavesOrJoinsStartsTheWindowAgain) {
  Job job(1.5);
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}}));
  StepSample gone = job.samples().at(2);
  job.samples().erase(2);  // rank 2 ended (or its heartbeat was not read this time)
  job.now() += std::chrono::seconds(12);
  job.watch().Observe(job.samples(), job.now());
  EXPECT_FALSE(job.watch().Take());
  job.samples()[2] = gone;
  job.now() += std::chrono::seconds(1);
  job.watch().Observe(job.samples(), job.now());
  EXPECT_FALSE(job.watch().Take());
  // Two whole windows from here.
  EXPECT_FALSE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}}));
  EXPECT_TRUE(job.Run(12, {{0, 0.4}, {1, 0.9}, {2, 0.4}}));
}

TEST(StragglerWatch, TwoRanksJudgeEachOtherAndOnlyTheSlowOneIsNamed) {
  StragglerWatch watch(1.5);
  std::map<int, StepSample> s{{0, {"a", 0, 0, 0}}, {1, {"b", 0, 0, 0}}};
  Clock::time_point now = Clock::now();
  watch.Observe(s, now);
  std::optional<Straggler> named;
  for (int i = 0; i < 2; ++i) {
    // Rank 0 is busy 1.0 s a step, rank 1 0.3 s and waits 0.7 s for it.
    s[0].step += 10;
    s[0].step_s += 10;
    s[1].step += 10;
    s[1].step_s += 10;
    s[1].waited_s += 7;
    now += std::chrono::seconds(11);
    watch.Observe(s, now);
    named = watch.Take();
  }
  ASSERT_TRUE(named);
  EXPECT_EQ(named->rank, 0);
  EXPECT_NEAR(named->others_busy_s, 0.3, 1e-9);
}

// A straggler's node that leaves gives its ranks the grace period and two of its steps before
// SIGKILL: its own busy time a step, or the others' step where they wait longer than it is busy
// (its collectives are throttled too). --grace-period 0 stays 0.
TEST(StragglerGrace, TheGracePeriodAndTwoOfTheStragglersSteps) {
  Straggler slow;
  slow.busy_s = 4.5;
  slow.others_busy_s = 0.4;
  slow.others_wait_s = 3.6;
  EXPECT_NEAR(slow.StepSeconds(), 4.5, 1e-9);
  EXPECT_NEAR(StragglerGraceSeconds(10, slow), 19, 1e-9);
  slow.others_wait_s = 9.6;  // the others' step, 10 s, is the straggler's too
  EXPECT_NEAR(slow.StepSeconds(), 10, 1e-9);
  EXPECT_NEAR(StragglerGraceSeconds(10, slow), 30, 1e-9);
  EXPECT_NEAR(StragglerGraceSeconds(2, slow), 22, 1e-9);
  EXPECT_EQ(StragglerGraceSeconds(0, slow), 0);
}

}  // namespace
}  // namespace dtrain
