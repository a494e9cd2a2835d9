// The rounds of an elastic Horovod job against horovodrun's elastic driver: who waits, who
// leaves with a failed rank's node, how the others are renumbered (hosts.get_host_assignments),
// and when the job cannot go on.
#include <gtest/gtest.h>

#include <string>

#include "launcher/elastic_cooldown.h"
#include "launcher/horovod_elastic_rounds.h"
#include "launcher/rank_plan.h"

namespace dtrain {
namespace {

// `hosts` nodes a, b, c, ... with `slots` ranks each, in plan order; machine names m-a, m-b, ...
RankPlan Plan(int hosts, int slots) {
  RankPlan plan;
  plan.world_size = hosts * slots;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < slots; ++l) {
      RankSlot slot;
      slot.rank = h * slots + l;
      slot.local_rank = l;
      slot.node_rank = h;
      slot.local_world_size = slots;
      slot.host = std::string(1, static_cast<char>('a' + h));
      slot.env["HOROVOD_HOSTNAME"] = "m-" + slot.host;
      plan.ranks.push_back(slot);
    }
  }
  return plan;
}

std::string Said(const HorovodElasticRounds& rounds, const std::string& key) {
  std::optional<HorovodSlotInfo> answer = rounds.Answer(key);
  return answer ? answer->Response() : "waiting";
}

const std::string kOut = "-1,-1,-1,-1,-1,-1";

TEST(HorovodElasticRounds, AFailedRanksNodeLeavesAndTheOthersAreRenumberedInHostOrder) {
  HorovodElasticRounds rounds(Plan(3, 2), /*min_np=*/2, /*reset_limit=*/-1);
  rounds.Ended(2, false);  // b's local rank 0
  for (const char* key : {"m-a:0", "m-a:1", "m-b:1", "m-c:0"}) {
    ASSERT_TRUE(rounds.Ready(key));
    EXPECT_EQ(Said(rounds, key), "waiting") << key << ": the round waits for m-c:1";
  }
  EXPECT_EQ(rounds.round(), 1);
  ASSERT_TRUE(rounds.Ready("m-c:1"));
  EXPECT_EQ(rounds.round(), 2);
  // rank,size,local_rank,local_size,cross_rank,cross_size
  EXPECT_EQ(Said(rounds, "m-a:0"), "0,4,0,2,0,2");
  EXPECT_EQ(Said(rounds, "m-a:1"), "1,4,1,2,0,2");
  EXPECT_EQ(Said(rounds, "m-c:0"), "2,4,0,2,1,2");
  EXPECT_EQ(Said(rounds, "m-c:1"), "3,4,1,2,1,2");
  EXPECT_EQ(Said(rounds, "m-b:1"), kOut) << "it leaves with its node";
  const std::map<std::string, int> scopes = {
      {"global", 4}, {"local_m-a", 2}, {"local_m-c", 2}, {"cross_0", 2}, {"cross_1", 2}};
  EXPECT_EQ(rounds.ScopeSizes(), scopes);
  const std::vector<ElasticRoundChange> changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].round, 2);
  EXPECT_EQ(changes[0].left_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(changes[0].failed_ranks, std::vector<int>{2});
  EXPECT_EQ(changes[0].left_ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(changes[0].size, 4);
  EXPECT_TRUE(rounds.TakeChanges().empty());
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);

  // The rank that left ends (Horovod raised "removed from elastic job"): nothing changes.
  rounds.Ended(3, false);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  // The next round: a's rank 1 fails; c's two ranks go on alone, a and b out.
  rounds.Ended(1, false);
  rounds.Ready("m-a:0");
  rounds.Ready("m-c:0");
  EXPECT_EQ(Said(rounds, "m-c:0"), "waiting");
  rounds.Ready("m-c:1");
  EXPECT_EQ(Said(rounds, "m-c:0"), "0,2,0,2,0,1");
  EXPECT_EQ(Said(rounds, "m-c:1"), "1,2,1,2,0,1");
  EXPECT_EQ(Said(rounds, "m-a:0"), kOut);
  EXPECT_EQ(rounds.round(), 3);
  // Both finish: the job is done.
  rounds.Ended(4, true);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  rounds.Ended(5, true);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kSucceeded);
}

TEST(HorovodElasticRounds, ARankThatFailsAfterItAskedCountsAsFailed) {
  HorovodElasticRounds rounds(Plan(2, 1), 1, -1);
  rounds.Ready("m-a:0");
  rounds.Ended(0, false);  // it asked, then died before the answer
  rounds.Ready("m-b:0");
  EXPECT_EQ(Said(rounds, "m-b:0"), "0,1,0,1,0,1");
  EXPECT_EQ(rounds.TakeChanges().at(0).left_hosts, std::vector<std::string>{"a"});
}

TEST(HorovodElasticRounds, FewerThanMinNpLeftFailsTheJobAndTellsTheWaitingToLeave) {
  HorovodElasticRounds rounds(Plan(3, 2), /*min_np=*/5, -1);
  rounds.Ended(2, false);
  for (const char* key : {"m-a:0", "m-a:1", "m-b:1", "m-c:0", "m-c:1"}) rounds.Ready(key);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kFailed);
  EXPECT_EQ(rounds.blamed_rank(), 2);
  EXPECT_NE(rounds.why_failed().find("4 rank(s) would remain after node(s) b left, fewer than "
                                     "--min-np 5"),
            std::string::npos)
      << rounds.why_failed();
  EXPECT_EQ(Said(rounds, "m-a:0"), kOut);
  EXPECT_EQ(Said(rounds, "m-c:1"), kOut);
  EXPECT_TRUE(rounds.TakeChanges().empty());
  EXPECT_EQ(rounds.round(), 1);
  EXPECT_EQ(Said(rounds, "m-x:0"), kOut);
  EXPECT_FALSE(rounds.Ready("m-x:0")) << "no such rank in the job";
}

TEST(HorovodElasticRounds, ResetLimitCountsTheRoundsThatWentOnWithFewer) {
  HorovodElasticRounds rounds(Plan(3, 1), 1, /*reset_limit=*/1);
  rounds.Ended(0, false);
  rounds.Ready("m-b:0");
  rounds.Ready("m-c:0");
  EXPECT_EQ(Said(rounds, "m-b:0"), "0,2,0,1,0,2");
  rounds.Ended(1, false);
  rounds.Ready("m-c:0");
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kFailed);
  EXPECT_NE(rounds.why_failed().find("--reset-limit 1"), std::string::npos) << rounds.why_failed();
  EXPECT_EQ(Said(rounds, "m-c:0"), kOut);
}

TEST(HorovodElasticRounds, EveryRankAskingAgainWithNoFailureKeepsItsPlace) {
  HorovodElasticRounds rounds(Plan(2, 1), 2, -1);
  rounds.Ready("m-a:0");
  rounds.Ready("m-b:0");
  EXPECT_EQ(Said(rounds, "m-a:0"), "0,2,0,1,0,2");
  EXPECT_EQ(Said(rounds, "m-b:0"), "1,2,0,1,1,2");
  EXPECT_EQ(rounds.round(), 2) << "a new round: its store starts empty";
  EXPECT_TRUE(rounds.TakeChanges().empty()) << "nobody left";
}

TEST(HorovodElasticRounds, EveryRankFailingOrOneFinishingWhileOthersWaitEndsTheJob) {
  {
    HorovodElasticRounds rounds(Plan(2, 1), 1, -1);
    rounds.Ended(0, false);
    rounds.Ended(1, false);
    EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kFailed);
    EXPECT_EQ(rounds.why_failed(), "every rank of round 1 failed");
    EXPECT_EQ(rounds.blamed_rank(), 1);
  }
  {
    HorovodElasticRounds rounds(Plan(2, 1), 1, -1);
    rounds.Ended(0, true);
    rounds.Ready("m-b:0");
    EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kFailed);
    EXPECT_EQ(Said(rounds, "m-b:0"), kOut);
  }
}

// Node a (Horovod's rank 0, whose state the others sync from) fails and leaves; when it comes
// back it is appended after b and c, as horovodrun appends a host that joins, so rank 0 stays on
// b. The round settles once the ranks in the job (told by the notification) asked; a's rank is
// started after that, with its place (Slot).
TEST(HorovodElasticRounds, ANodeThatRejoinsComesLastOnceTheRanksInTheJobAsked) {
  HorovodElasticRounds rounds(Plan(3, 1), /*min_np=*/1, /*reset_limit=*/-1);
  EXPECT_EQ(rounds.CoordinatorKey(), "m-a:0");
  EXPECT_EQ(rounds.Rejoin("a"), "node a is in the job");
  EXPECT_EQ(rounds.Rejoin("z"), "node z has no rank in the job");
  rounds.Ended(0, false);
  ASSERT_TRUE(rounds.Ready("m-b:0"));
  ASSERT_TRUE(rounds.Ready("m-c:0"));
  EXPECT_EQ(Said(rounds, "m-b:0"), "0,2,0,1,0,2");
  EXPECT_EQ(rounds.CoordinatorKey(), "m-b:0");
  rounds.TakeChanges();

  ASSERT_EQ(rounds.Rejoin("a"), "");
  EXPECT_EQ(rounds.CoordinatorKey(), "m-b:0") << "a rank that joins is no coordinator yet";
  EXPECT_EQ(rounds.Slot(0), std::nullopt) << "not before the round is settled";
  ASSERT_TRUE(rounds.Ready("m-b:0"));
  EXPECT_EQ(Said(rounds, "m-b:0"), "waiting") << "c has not reset yet";
  EXPECT_EQ(rounds.round(), 2);
  ASSERT_TRUE(rounds.Ready("m-c:0"));
  EXPECT_EQ(rounds.round(), 3);
  EXPECT_EQ(Said(rounds, "m-b:0"), "0,3,0,1,0,3");
  EXPECT_EQ(Said(rounds, "m-c:0"), "1,3,0,1,1,3");
  ASSERT_TRUE(rounds.Slot(0));
  EXPECT_EQ(rounds.Slot(0)->Response(), "2,3,0,1,2,3");
  EXPECT_EQ(rounds.CoordinatorKey(), "m-b:0");
  const std::vector<ElasticRoundChange> changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].round, 3);
  EXPECT_EQ(changes[0].size, 3);
  EXPECT_TRUE(changes[0].left_hosts.empty());
  EXPECT_EQ(changes[0].joined_hosts, std::vector<std::string>{"a"});
  EXPECT_EQ(changes[0].joined_ranks, std::vector<int>{0});
  EXPECT_EQ(rounds.ScopeSizes().at("global"), 3);
  for (int rank : {0, 1, 2}) rounds.Ended(rank, true);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kSucceeded);
}

// The ranks in the job finish before the round that lets the joined ranks in (no commit came
// after the notification): the job is done, not failed, and the joined ranks never start.
TEST(HorovodElasticRounds, TheJobFinishingBeforeTheJoinedRanksAreLetInSucceeds) {
  HorovodElasticRounds rounds(Plan(2, 1), /*min_np=*/1, /*reset_limit=*/-1);
  rounds.Ended(1, false);
  ASSERT_TRUE(rounds.Ready("m-a:0"));
  ASSERT_EQ(rounds.round(), 2);
  ASSERT_EQ(rounds.Rejoin("b"), "");
  rounds.Ended(0, true);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kSucceeded) << rounds.why_failed();
  EXPECT_EQ(rounds.Slot(1), std::nullopt);
}

// A rank that joined and fails before the round settles takes its node out again; the others go
// on without it. A node may not join once --reset-limit rounds were used.
TEST(HorovodElasticRounds, AJoinedRankThatFailsLeavesAgainAndTheResetLimitStopsJoins) {
  HorovodElasticRounds rounds(Plan(3, 1), /*min_np=*/1, /*reset_limit=*/3);
  rounds.Ended(2, false);
  ASSERT_TRUE(rounds.Ready("m-a:0"));
  ASSERT_TRUE(rounds.Ready("m-b:0"));
  ASSERT_EQ(rounds.round(), 2);
  rounds.TakeChanges();
  ASSERT_EQ(rounds.Rejoin("c"), "");
  ASSERT_TRUE(rounds.Ready("m-a:0"));
  ASSERT_TRUE(rounds.Ready("m-b:0"));
  ASSERT_EQ(rounds.round(), 3);
  EXPECT_EQ(rounds.Slot(2)->Response(), "2,3,0,1,2,3");
  rounds.TakeChanges();
  rounds.Ended(2, false);  // its new process could not start: the others' rendezvous fails
  ASSERT_TRUE(rounds.Ready("m-a:0"));
  ASSERT_TRUE(rounds.Ready("m-b:0"));
  EXPECT_EQ(rounds.round(), 4);
  EXPECT_EQ(Said(rounds, "m-a:0"), "0,2,0,1,0,2");
  const std::vector<ElasticRoundChange> changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].left_hosts, std::vector<std::string>{"c"});
  EXPECT_TRUE(changes[0].joined_hosts.empty());
  EXPECT_EQ(rounds.Rejoin("c"), "the job was already reset 3 time(s) (--reset-limit 3)");
}

// horovodrun's HostState._set_cooldown_period: MIN * 2^n + u * MIN for the n-th leave, held
// between MIN and MAX.
TEST(ElasticCooldown, DoublesWithEachLeaveBetweenMinAndMax) {
  EXPECT_DOUBLE_EQ(CooldownSeconds(10, 3600, 1, 0), 20);
  EXPECT_DOUBLE_EQ(CooldownSeconds(10, 3600, 1, 0.5), 25);
  EXPECT_DOUBLE_EQ(CooldownSeconds(10, 3600, 2, 0), 40);
  EXPECT_DOUBLE_EQ(CooldownSeconds(10, 3600, 3, 0.99), 89.9);
  EXPECT_DOUBLE_EQ(CooldownSeconds(10, 100, 4, 0), 100) << "held at MAX";
  EXPECT_DOUBLE_EQ(CooldownSeconds(1, 2, 1, 0.7), 2);
  EXPECT_DOUBLE_EQ(CooldownSeconds(5, 5, 1, 0), 5) << "MIN == MAX";
  EXPECT_DOUBLE_EQ(CooldownSeconds(1, 3600, 1000, 0.5), 3600) << "no overflow";
}

// --host-discovery-script: a node not listed at the start is absent from round 1 (the others
// numbered without it), joins when listed, and one no longer listed is taken out at the next
// round without having failed.
TEST(HorovodElasticRounds, AnAbsentNodeIsLeftOutOfTheFirstRoundAndJoinsWhenListed) {
  HorovodElasticRounds rounds(Plan(3, 1), /*min_np=*/1, /*reset_limit=*/-1);
  rounds.Absent("b");
  ASSERT_TRUE(rounds.Slot(0));
  EXPECT_EQ(rounds.Slot(0)->Response(), "0,2,0,1,0,2");
  EXPECT_FALSE(rounds.Slot(1)) << "b is not in round 1";
  EXPECT_EQ(rounds.Slot(2)->Response(), "1,2,0,1,1,2");
  const std::map<std::string, int> scopes = {
      {"global", 2}, {"local_m-a", 1}, {"local_m-c", 1}, {"cross_0", 2}};
  EXPECT_EQ(rounds.ScopeSizes(), scopes);
  EXPECT_EQ(rounds.WhyNotJoin("b"), "");
  ASSERT_EQ(rounds.Rejoin("b"), "");
  rounds.Ready("m-a:0");
  EXPECT_EQ(Said(rounds, "m-a:0"), "waiting");
  rounds.Ready("m-c:0");
  EXPECT_EQ(Said(rounds, "m-a:0"), "0,3,0,1,0,3");
  EXPECT_EQ(Said(rounds, "m-c:0"), "1,3,0,1,1,3");
  EXPECT_EQ(rounds.Slot(1)->Response(), "2,3,0,1,2,3") << "a node that joins comes last";
  const std::vector<ElasticRoundChange> changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].joined_hosts, std::vector<std::string>{"b"});
  EXPECT_TRUE(changes[0].left_hosts.empty());
}

TEST(HorovodElasticRounds, ANodeTakenOutLeavesAtTheNextRoundWithoutHavingFailed) {
  HorovodElasticRounds rounds(Plan(3, 2), /*min_np=*/2, /*reset_limit=*/-1);
  EXPECT_EQ(rounds.Remove("b"), "");
  EXPECT_EQ(rounds.Remove("z"), "node z is not in the job");
  EXPECT_EQ(rounds.WhyNotJoin("b"), "node b is in the job") << "until the round is settled";
  // Told that hosts were removed, every rank resets at its commit and asks, b's too.
  for (const char* key : {"m-a:0", "m-a:1", "m-b:0", "m-b:1", "m-c:0"}) {
    rounds.Ready(key);
    EXPECT_EQ(Said(rounds, key), "waiting") << key;
  }
  rounds.Ready("m-c:1");
  EXPECT_EQ(Said(rounds, "m-a:0"), "0,4,0,2,0,2");
  EXPECT_EQ(Said(rounds, "m-c:1"), "3,4,1,2,1,2");
  EXPECT_EQ(Said(rounds, "m-b:0"), kOut);
  EXPECT_EQ(Said(rounds, "m-b:1"), kOut);
  const std::vector<ElasticRoundChange> changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].left_hosts.empty()) << "b did not fail";
  EXPECT_TRUE(changes[0].failed_ranks.empty());
  EXPECT_EQ(changes[0].removed_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(changes[0].removed_ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(changes[0].size, 4);
  // b's ranks end with Horovod's "removed" error: the job goes on and ends well without them.
  rounds.Ended(2, false);
  rounds.Ended(3, false);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  // Listed again later, it may join.
  EXPECT_EQ(rounds.WhyNotJoin("b"), "");
  for (int rank : {0, 1, 4, 5}) rounds.Ended(rank, true);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kSucceeded);
}

TEST(HorovodElasticRounds, TakingOutBelowMinNpFailsAndAJoinerTakenOutNeverJoins) {
  HorovodElasticRounds rounds(Plan(2, 1), /*min_np=*/2, /*reset_limit=*/-1);
  ASSERT_EQ(rounds.Remove("b"), "");
  rounds.Ready("m-a:0");
  rounds.Ready("m-b:0");
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kFailed);
  EXPECT_EQ(rounds.why_failed(),
            "1 rank(s) would remain after node(s) b left, fewer than --min-np 2");

  HorovodElasticRounds joining(Plan(3, 1), /*min_np=*/1, /*reset_limit=*/-1);
  joining.Absent("c");
  ASSERT_EQ(joining.Rejoin("c"), "");
  ASSERT_EQ(joining.Remove("c"), "") << "no longer listed before it was let in";
  joining.Ready("m-a:0");
  joining.Ready("m-b:0");
  EXPECT_EQ(Said(joining, "m-a:0"), "0,2,0,1,0,2") << "the same two go on";
  EXPECT_FALSE(joining.Slot(2));
  EXPECT_TRUE(joining.TakeChanges().empty());
}

TEST(HorovodElasticRounds, MaxNpKeepsANodeOut) {
  HorovodElasticRounds rounds(Plan(3, 2), /*min_np=*/2, /*reset_limit=*/-1, /*max_np=*/4);
  rounds.Absent("c");
  EXPECT_EQ(rounds.WhyNotJoin("c"),
            "the job has 4 rank(s), and its 2 would make more than --max-np 4");
  EXPECT_EQ(rounds.Rejoin("c"), rounds.WhyNotJoin("c"));
  rounds.Ended(0, false);  // a leaves: room for c
  for (const char* key : {"m-a:1", "m-b:0", "m-b:1"}) rounds.Ready(key);
  EXPECT_EQ(rounds.WhyNotJoin("c"), "");
}

// horovodrun's driver waits up to --elastic-timeout for slots when fewer than --min-np remain.
TEST(HorovodElasticRounds, BelowMinNpTheOthersWaitUnansweredUntilANodeJoins) {
  HorovodElasticRounds rounds(Plan(3, 1), /*min_np=*/3, /*reset_limit=*/-1, /*max_np=*/0,
                              std::chrono::seconds(60));
  rounds.Ended(1, false);  // b fails
  rounds.Ready("m-a:0");
  rounds.Ready("m-c:0");
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  EXPECT_EQ(Said(rounds, "m-a:0"), "waiting") << "2 ranks are fewer than --min-np 3";
  EXPECT_EQ(Said(rounds, "m-c:0"), "waiting");
  EXPECT_TRUE(rounds.waiting_since());
  std::vector<ElasticRoundChange> changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].waiting);
  EXPECT_EQ(changes[0].wait, std::chrono::seconds(60));
  EXPECT_EQ(changes[0].left_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(changes[0].failed_ranks, std::vector<int>{1});
  EXPECT_EQ(changes[0].size, 2);
  EXPECT_EQ(rounds.round(), 1) << "no new round yet";
  rounds.CheckWait(*rounds.waiting_since() + std::chrono::seconds(59));
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  // b is back: the others asked already, so the round is settled at once, b last.
  EXPECT_EQ(rounds.WhyNotJoin("b"), "");
  ASSERT_EQ(rounds.Rejoin("b"), "");
  EXPECT_EQ(rounds.round(), 2);
  EXPECT_FALSE(rounds.waiting_since());
  EXPECT_EQ(Said(rounds, "m-a:0"), "0,3,0,1,0,3");
  EXPECT_EQ(Said(rounds, "m-c:0"), "1,3,0,1,1,3");
  ASSERT_TRUE(rounds.Slot(1));
  EXPECT_EQ(rounds.Slot(1)->Response(), "2,3,0,1,2,3");
  changes = rounds.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].waiting);
  EXPECT_EQ(changes[0].joined_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(changes[0].round, 2);
  EXPECT_EQ(changes[0].size, 3);
  for (int rank : {0, 1, 2}) rounds.Ended(rank, true);
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kSucceeded);
}

TEST(HorovodElasticRounds, TheWaitForNodesRunsOutOrEndsWhenNobodyStays) {
  HorovodElasticRounds rounds(Plan(3, 1), /*min_np=*/3, /*reset_limit=*/-1, /*max_np=*/0,
                              std::chrono::seconds(5));
  ASSERT_EQ(rounds.Remove("b"), "");
  for (const char* key : {"m-a:0", "m-b:0", "m-c:0"}) rounds.Ready(key);
  EXPECT_EQ(Said(rounds, "m-b:0"), kOut) << "taken out: told at once";
  EXPECT_EQ(Said(rounds, "m-a:0"), "waiting");
  rounds.Ended(2, false);  // c fails while it waits: a waits on alone
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  const auto since = *rounds.waiting_since();
  rounds.CheckWait(since + std::chrono::seconds(4));
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kRunning);
  rounds.CheckWait(since + std::chrono::seconds(5));
  EXPECT_EQ(rounds.verdict(), HorovodElasticRounds::Verdict::kFailed);
  EXPECT_EQ(rounds.why_failed(),
            "1 rank(s) remained after node(s) b,c left, fewer than --min-np 3, and no node joined "
            "within 5 s (--elastic-timeout)");
  EXPECT_EQ(rounds.blamed_rank(), 2);
  EXPECT_EQ(Said(rounds, "m-a:0"), kOut);

  // Every rank that would stay failed: nothing to wait with.
  HorovodElasticRounds none(Plan(2, 1), /*min_np=*/2, /*reset_limit=*/-1, /*max_np=*/0,
                            std::chrono::seconds(5));
  none.Ended(0, false);
  none.Ended(1, false);
  EXPECT_EQ(none.verdict(), HorovodElasticRounds::Verdict::kFailed);
  EXPECT_FALSE(none.waiting_since());
}

}  // namespace
}  // namespace dtrain
