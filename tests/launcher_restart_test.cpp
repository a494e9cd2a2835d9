// Restarts that make sense (issue 27): the node pool's rules (unit), and on local ranks for real:
// one restart budget for the whole job, a backoff between attempts that grows, the cause of each
// attempt in job.json, and an error every rank hits at start that is not retried.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launcher/attempt_steps.h"
#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/node_pool.h"
#include "launcher/restart_policy.h"
#include "launcher/step_watch.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/hanging_torch.h"
#include "tests/support/killed_after_step_seven.h"

namespace dtrain {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::RunDtrain;

std::vector<NodeSpec> Nodes(int n) {
  std::vector<NodeSpec> nodes(n);
  for (int i = 0; i < n; ++i) nodes[i].host = "n" + std::to_string(i);
  return nodes;
}

TEST(NodePool, SparesWaitUntilANodeIsQuarantined) {
  std::vector<NodeSpec> nodes = Nodes(4);
  MarkSpares(nodes, 1);
  NodePool pool(nodes, {});
  EXPECT_EQ(pool.Pick(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(pool.Blame(1, /*lost=*/true, "node n1 lost"), "node n1 lost");
  EXPECT_EQ(pool.Pick(), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(pool.Blame(2, false, "exit 1"), "");  // one failure: still trusted
  EXPECT_EQ(pool.Pick(), (std::vector<int>{0, 2, 3}));
  EXPECT_THAT(pool.Blame(2, false, "exit 1"), HasSubstr("2 failed attempts"));
  EXPECT_TRUE(pool.Pick().empty());  // 2 healthy, the job needs 3
  EXPECT_EQ(pool.why_not(), "2 healthy node(s) left, the job needs at least 3");
}

TEST(NodePool, NnodesMinMaxShrinksDownToTheMinimum) {
  NodePool pool(Nodes(3), ParseNodeCount("2:3"));
  pool.Blame(0, true, "lost");
  EXPECT_EQ(pool.Pick(), (std::vector<int>{1, 2}));
  pool.Blame(2, true, "lost");
  EXPECT_TRUE(pool.Pick().empty());
  EXPECT_THAT(pool.why_not(), HasSubstr("at least 2 (--nnodes)"));
  EXPECT_THROW(ParseNodeCount("3:2"), Error);
  EXPECT_THROW(NodePool(Nodes(2), ParseNodeCount("3")), Error);
  std::vector<NodeSpec> nodes = Nodes(2);
  EXPECT_THROW(MarkSpares(nodes, 2), Error);
}

TEST(NodePool, GoesOnWithoutANodeOnlyWhereASpareOrTheMinimumAllows) {
  std::vector<NodeSpec> nodes = Nodes(4);
  MarkSpares(nodes, 1);
  NodePool spare(nodes, {});
  EXPECT_TRUE(spare.CanGoOnWithout(1));  // the spare takes its place
  spare.Quarantine(2, "unfit");
  EXPECT_FALSE(spare.CanGoOnWithout(1));  // the spare already took node 2's
  NodePool fixed(Nodes(3), {});
  EXPECT_FALSE(fixed.CanGoOnWithout(0));
  NodePool elastic(Nodes(3), ParseNodeCount("2:3"));
  EXPECT_TRUE(elastic.CanGoOnWithout(0));
  elastic.Quarantine(2, "lost");
  EXPECT_FALSE(elastic.CanGoOnWithout(0));
  EXPECT_TRUE(elastic.CanGoOnWithout(2)) << "already out: the others are enough";
}

// Lost, unreachable or unfit nodes may return once; a node blamed for failed attempts, or
// quarantined for its links, may not.
TEST(NodePool, LostOrUnfitNodesMayReturnOnce) {
  NodePool pool(Nodes(4), ParseNodeCount("2:4"));
  pool.Blame(1, /*lost=*/true, "node n1 lost");
  pool.Quarantine(2, "failed the health check before restart: Xid 79", /*may_return=*/true);
  pool.Blame(3, false, "exit 1");
  pool.Blame(3, false, "exit 1");
  EXPECT_TRUE(pool.Pick().empty());  // one healthy node, the job needs 2
  EXPECT_EQ(pool.MayReturn(), (std::vector<int>{1, 2}));
  pool.Return(1);
  EXPECT_EQ(pool.quarantined(1), "");
  EXPECT_EQ(pool.Pick(), (std::vector<int>{0, 1}));
  EXPECT_EQ(pool.MayReturn(), (std::vector<int>{2}));
  EXPECT_EQ(pool.Blame(1, false, "exit 1"), "") << "its failures were forgotten";
  EXPECT_EQ(pool.Blame(1, true, "node n1 lost again"), "node n1 lost again");
  EXPECT_EQ(pool.MayReturn(), (std::vector<int>{2})) << "once only";
  NodePool links(Nodes(3), ParseNodeCount("2:3"));
  links.Quarantine(0, "its link errors grew during the failed attempt");
  EXPECT_TRUE(links.MayReturn().empty());
}

TEST(RestartPolicy, BackoffDoublesUpToThirtySeconds) {
  EXPECT_EQ(BackoffSeconds(1), 1);
  EXPECT_EQ(BackoffSeconds(2), 2);
  EXPECT_EQ(BackoffSeconds(3), 4);
  EXPECT_EQ(BackoffSeconds(6), 30);
  EXPECT_EQ(BackoffSeconds(60), 30);
}

TEST(StepWatch, StepNumbersFromMetricsLines) {
  EXPECT_EQ(ReadMetricsStep(R"({"step":12,"epoch":0,"loss":4.2})").step, 12);
  EXPECT_EQ(ReadMetricsStep(R"({"epoch": 1, "step" : 7})").step, 7);
  EXPECT_EQ(ReadMetricsStep(R"({"event":"end","samples":640})").step, -1);
  EXPECT_EQ(ReadMetricsStep(R"({"step":"warmup"})").step, -1);
  EXPECT_EQ(ReadMetricsStep(R"({"steps_total":3})").step, -1);
}

TEST(StepWatch, StepsLostAreTheStepsTheNextAttemptDidAgain) {
  JobAttempt failed, next;
  failed.last_step = 17;
  next.first_step = 16;  // resumed from the checkpoint of step 15
  EXPECT_EQ(StepsLost(failed, next), 2);
  next.first_step = 1;  // no checkpoint: from the start
  EXPECT_EQ(StepsLost(failed, next), 17);
  next.first_step = 18;  // checkpointed its last step
  EXPECT_EQ(StepsLost(failed, next), 0);
  next.first_step = -1;  // the next attempt's steps not seen
  EXPECT_EQ(StepsLost(failed, next), -1);
}

// An attempt's line names the next attempt's first step when steps are seen at all, and says it
// was not seen only when the failed attempt's steps were.
TEST(StepWatch, AttemptLineSpeaksOfStepsOnlyWhereStepsAreSeen) {
  JobAttempt failed, next;
  failed.restart_count = 0;
  failed.nodes = {"a"};
  failed.exit_code = 137;
  failed.cause = "signal";
  failed.fault_us = 10'000'000;
  next.restart_count = 1;
  next.exit_code = 0;
  EXPECT_EQ(DescribeAttempt(failed, &next), "attempt 1 on a: signal");  // no metrics at all
  failed.last_step = 17;
  EXPECT_EQ(DescribeAttempt(failed, &next),
            "attempt 1 on a: signal; next attempt's first step not seen");
  next.first_step_us = 12'500'000;
  next.first_step = 16;
  EXPECT_EQ(DescribeAttempt(failed, &next),
            "attempt 1 on a: signal; next attempt's first step 2.5 s after the fault, 2 step(s) "
            "lost");
}

// Lines fetched from a node whose clock is 2 s behind the launcher's: placed in the attempts by
// their time, lines of other attempts' windows and lines without a time left out.
TEST(AttemptSteps, LinesArePlacedByTheirTimeOnTheNodesClock) {
  const int64_t t0 = 1'000'000'000'000'000, s = 1'000'000, behind = 2 * s;
  std::vector<JobAttempt> attempts(3);
  auto ran = [&](int i, int64_t from_s, int64_t to_s, std::vector<std::string> nodes) {
    attempts[i].started_us = t0 + from_s * s;
    attempts[i].ended_us = t0 + to_s * s;
    attempts[i].nodes = std::move(nodes);
  };
  ran(0, 0, 10, {"gpu-a", "gpu-b"});
  ran(1, 12, 20, {"gpu-c"});
  ran(2, 22, 30, {"gpu-a"});
  testing::TempDir dir;
  const std::string file = dir.path() + "/rank-0.jsonl";
  auto at = [&](int64_t launcher_us) { return std::to_string(launcher_us - behind); };
  testing::WriteFile(
      file, "{\"step\":1,\"time_us\":" + at(t0 + 2 * s) + "}\n" +
                "{\"step\":2,\"epoch\":0}\n" +  // no time: not placed
                "{\"step\":5,\"time\":" + std::to_string((t0 + 9 * s - behind) / 1e6) + "}\n" +
                "{\"step\":4,\"time_us\":" + at(t0 + 23 * s) + "}\n" +
                "{\"step\":9,\"time_us\":" + at(t0 + 29 * s) + "}\n");
  EXPECT_EQ(FillAttemptSteps(attempts, "gpu-a", file, behind), 2);
  EXPECT_EQ(attempts[0].first_step, 1);
  EXPECT_EQ(attempts[0].first_step_us, t0 + 2 * s);
  EXPECT_EQ(attempts[0].last_step, 5);
  EXPECT_EQ(attempts[1].first_step, -1);  // rank 0 ran on gpu-c: its file is not this one
  EXPECT_EQ(attempts[2].first_step, 4);
  EXPECT_EQ(attempts[2].last_step, 9);
  EXPECT_EQ(StepsLost(attempts[0], attempts[2]), 2);
}

// Where an attempt's steps come from when its rank 0's node was lost: its first node that was not,
// and the first rank that node ran then (ranks node by node, as many per node as the last plan
// gave each: 2 here).
TEST(AttemptSteps, ALostRankZerosAttemptIsReadFromItsFirstNodeNotLost) {
  const std::map<int, std::string> last_plan{{0, "b"}, {1, "b"}, {2, "d"}, {3, "d"}};
  JobAttempt a;
  a.nodes = {"a", "b", "c"};
  AttemptStepSource source = StepSourceOf(a, last_plan, {"a"});
  EXPECT_EQ(source.host, "b");
  EXPECT_EQ(source.rank, 2);
  source = StepSourceOf(a, last_plan, {"a", "b"});
  EXPECT_EQ(source.host, "c");
  EXPECT_EQ(source.rank, 4);
  EXPECT_EQ(StepSourceOf(a, last_plan, {"a", "b", "c"}).host, "");
  // Nodes of unequal rank counts: one not in the last plan has an unknown count.
  const std::map<int, std::string> uneven{{0, "b"}, {1, "b"}, {2, "d"}};
  EXPECT_EQ(StepSourceOf(a, uneven, {"a"}).host, "");
  a.nodes = {"b", "a", "d"};
  source = StepSourceOf(a, uneven, {"b", "a"});
  EXPECT_EQ(source.host, "");  // a's count is not known, so neither is d's first rank
  a.nodes = {"b", "d"};
  source = StepSourceOf(a, uneven, {"b"});
  EXPECT_EQ(source.host, "d");
  EXPECT_EQ(source.rank, 2);
}

// The record after a job whose first attempt lost rank 0's node: that attempt's steps from the
// file the fetch put under metrics/attempt-1/ for its other node's rank, the second's from the
// new rank 0's own file; job.json written again with the steps lost. Where rank 0's node left but
// was not lost, its own rank 0's file.
TEST(AttemptSteps, PlacedFromAnotherNodeWhenRankZerosWasLost) {
  const int64_t t0 = 1'000'000'000'000'000, s = 1'000'000;
  testing::TempDir dir;
  JobRecord record;
  record.name = "lost";
  record.attempts.resize(2);
  auto ran = [&](int i, int64_t from_s, int64_t to_s, std::vector<std::string> nodes) {
    record.attempts[i].restart_count = i;
    record.attempts[i].started_us = t0 + from_s * s;
    record.attempts[i].ended_us = t0 + to_s * s;
    record.attempts[i].exit_code = i == 0 ? 1 : 0;
    record.attempts[i].nodes = std::move(nodes);
  };
  ran(0, 0, 10, {"node0", "node1"});
  ran(1, 12, 20, {"node1", "node2"});
  record.plan.ranks.resize(2);
  record.plan.ranks[0].rank = 0;
  record.plan.ranks[0].host = "node1";
  record.plan.ranks[1].rank = 1;
  record.plan.ranks[1].host = "node2";
  std::filesystem::create_directories(dir.path() + "/metrics/attempt-1");
  auto line = [&](int step, int64_t at) {
    return "{\"step\":" + std::to_string(step) + ",\"time_us\":" + std::to_string(at) + "}\n";
  };
  testing::WriteFile(EarlierMetricsPath(dir.path(), 1, 1),
                     line(1, t0 + 1 * s) + line(7, t0 + 9 * s));
  testing::WriteFile(dir.path() + "/metrics/rank-0.jsonl",
                     line(5, t0 + 14 * s) + line(20, t0 + 19 * s));
  PlaceFetchedSteps(record, dir.path(), {"node0"});
  EXPECT_EQ(record.attempts[0].first_step, 1);
  EXPECT_EQ(record.attempts[0].last_step, 7);
  EXPECT_EQ(record.attempts[1].first_step, 5);
  EXPECT_EQ(StepsLost(record.attempts[0], record.attempts[1]), 3);
  const std::string written = testing::ReadFile(JobRecordPath(dir.path()));
  EXPECT_NE(written.find("\"steps_lost\": 3"), std::string::npos) << written;
  // node0 left but answered (a straggler, unfit): its own rank 0's file, fetched the same way.
  JobRecord left = record;
  left.attempts[0].first_step = left.attempts[0].last_step = -1;
  testing::WriteFile(EarlierMetricsPath(dir.path(), 1, 0),
                     line(1, t0 + 1 * s) + line(8, t0 + 9 * s));
  PlaceFetchedSteps(left, dir.path(), {});
  EXPECT_EQ(left.attempts[0].first_step, 1);
  EXPECT_EQ(left.attempts[0].last_step, 8);
}

// Rank 0 checkpoints every 3 steps, appends a metrics line per step, and is SIGKILLed right after
// step 7 of the first attempt: the next attempt resumes from step 6, so 1 step was lost.
TEST(Restarts, StepsLostAndTheTimeToTheNextFirstStepAreRecorded) {
  testing::TempDir dir;
  const char* script = testing::kKilledAfterStepSeven;
  const auto run = RunDtrain({"launch", "--job", "lost", "--nproc-per-node", "2", "--max-restarts",
                              "1", "--grace-period", "1", "--", "sh", "-c", script},
                             dir.path(), {}, 60);
  EXPECT_EQ(run.status, 0) << run.err;
  const json record = json::parse(testing::ReadFile(dir.path() + "/dtrain-logs/lost/job.json"));
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << record.dump(2);
  EXPECT_EQ(attempts[0]["first_step"], 1);
  EXPECT_EQ(attempts[0]["last_step"], 7);
  EXPECT_EQ(attempts[1]["first_step"], 7);
  EXPECT_EQ(attempts[1]["last_step"], 10);
  EXPECT_EQ(attempts[0]["steps_lost"], 1) << attempts.dump(2);
  ASSERT_TRUE(attempts[0].contains("recovery_s")) << attempts.dump(2);
  EXPECT_GT(attempts[0]["recovery_s"].get<double>(), BackoffSeconds(1));
  EXPECT_THAT(run.err, HasSubstr("s after the fault, 1 step(s) lost"));
}

TEST(RestartPolicy, CollectiveTimeoutsAreToldApartAndBlameTheMissingRank) {
  RankPlan plan;
  for (int r = 0; r < 4; ++r) {
    RankSlot slot;
    slot.rank = r;
    slot.host = "gpu-" + std::to_string(r / 2);
    plan.ranks.push_back(slot);
  }
  auto judged = [&plan](const std::string& cause, const std::string& text) {
    AttemptVerdict v;
    v.cause = cause;
    v.blamed_host = "gpu-0";
    v.detail = "rank 0 on node gpu-0: exit 1";
    MarkCollectiveTimeout(plan, v, text);
    return v;
  };
  // NCCL's watchdog aborts the rank: a signal.
  AttemptVerdict v = judged("signal",
                            "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
                            "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
                            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600054 "
                            "milliseconds before timing out.");
  EXPECT_EQ(v.cause, "collective-timeout");
  EXPECT_EQ(v.blamed_host, "");
  v = judged("error",
             "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed "
             "out waiting 30000ms for recv operation to complete");
  EXPECT_EQ(v.cause, "collective-timeout");
  // dtrain-clip names the rank that never came.
  v = judged("error",
             "RuntimeError: allreduce #12 (world: gradients, 1.2 MiB) on rank 0: waited 30 s; "
             "rank 3 has not entered it: last activity forward at step 11, 31 s ago (Timed out "
             "waiting 30000ms for recv operation to complete)");
  EXPECT_EQ(v.cause, "collective-timeout");
  EXPECT_EQ(v.blamed_host, "gpu-1");
  EXPECT_THAT(v.detail, HasSubstr("rank 3 on node gpu-1 never entered the collective"));
  // Not a collective: left alone.
  v = judged("error", "ValueError: bad shape\nTimeoutError: reading the dataset timed out");
  EXPECT_EQ(v.cause, "error");
  EXPECT_EQ(v.blamed_host, "gpu-0");
  v = judged("stall", "Watchdog caught collective operation timeout");
  EXPECT_EQ(v.cause, "stall");
}

// The real thing: torch.distributed's Gloo all_reduce with a 3 s timeout, rank 1 not coming.
TEST(Restarts, GlooCollectiveTimeoutIsToldApart) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  testing::TempDir dir;
  const std::string script = dir.path() + "/late.py";
  testing::WriteFile(script,
                     "import datetime, time, torch, torch.distributed as dist\n"
                     "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=3))\n"
                     "if dist.get_rank() == 1:\n    time.sleep(60)\n"
                     "dist.all_reduce(torch.ones(4))\n");
  const auto run = RunDtrain({"launch", "--job", "late", "-np", "2", "--quiet", "--grace-period",
                              "1", "--", testing::kVenvPython, script},
                             dir.path(), {}, 90);
  EXPECT_EQ(run.status, 1) << run.err;
  const json record = json::parse(testing::ReadFile(dir.path() + "/dtrain-logs/late/job.json"));
  ASSERT_EQ(record["attempts"].size(), 1u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "collective-timeout") << run.err;
}

TEST(Restarts, AnErrorEveryRankHitsAtStartIsNotRetried) {
  testing::TempDir dir;
  const auto run = RunDtrain({"launch", "--job", "det", "--nproc-per-node", "2", "--max-restarts",
                              "3", "--", "sh", "-c", "echo import error >&2; exit 3"},
                             dir.path());
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_THAT(run.err, HasSubstr("job det not restarted: every rank exited with 3 within 10 s of "
                                 "the start"));
  const json record = json::parse(testing::ReadFile(dir.path() + "/dtrain-logs/det/job.json"));
  ASSERT_EQ(record["attempts"].size(), 1u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "error");
}

TEST(Restarts, OneBudgetForTheJobWithGrowingBackoff) {
  testing::TempDir dir;
  // Rank 1 is killed by a signal soon after it starts, every attempt; rank 0 would run on.
  const char* script = "if [ $RANK = 1 ]; then sleep 0.3; kill -9 $$; fi; sleep 30";
  const auto run =
      RunDtrain({"launch", "--job", "budget", "--nproc-per-node", "2", "--max-restarts", "3",
                 "--grace-period", "1", "--", "sh", "-c", script},
                dir.path(), {}, 120);
  EXPECT_EQ(run.status, 128 + 9) << run.err;
  EXPECT_THAT(run.err, HasSubstr("all 3 restart(s) used"));
  EXPECT_THAT(run.err, HasSubstr("restarting job budget (restart 3 of 3) in 4 s"));
  const json record = json::parse(testing::ReadFile(dir.path() + "/dtrain-logs/budget/job.json"));
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 4u) << record.dump(2);
  for (size_t i = 0; i < attempts.size(); ++i) {
    EXPECT_EQ(attempts[i]["cause"], "signal") << attempts[i].dump();
    EXPECT_EQ(attempts[i]["failed_rank"], 1);
    if (i == 0) continue;
    const double gap =
        (attempts[i]["started_us"].get<int64_t>() - attempts[i - 1]["ended_us"].get<int64_t>()) /
        1e6;
    EXPECT_GE(gap, BackoffSeconds(static_cast<int>(i)) - 0.05) << "before attempt " << i + 1;
    EXPECT_LT(gap, BackoffSeconds(static_cast<int>(i)) + 1.0) << "before attempt " << i + 1;
  }
  EXPECT_THAT(run.err, HasSubstr("job budget attempts:"));
}

}  // namespace
}  // namespace dtrain
