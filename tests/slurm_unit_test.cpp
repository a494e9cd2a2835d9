// Slurm transport pieces that need no cluster: hostlists, step plans, labelled output, sbatch,
// what job.json keeps of the Slurm job.
#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/rank_plan.h"
#include "launcher/slurm/slurm_allocation.h"
#include "launcher/slurm/slurm_batch.h"
#include "launcher/slurm/slurm_hostlist.h"
#include "launcher/slurm/slurm_step.h"
#include "tests/support/files.h"

namespace dtrain {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmHostlist, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(ExpandHostlist("node[01-03,07]"), (Hosts{"node01", "node02", "node03", "node07"}));
  EXPECT_EQ(ExpandHostlist("login,gpu[9-11]"), (Hosts{"login", "gpu9", "gpu10", "gpu11"}));
  EXPECT_EQ(ExpandHostlist("r[1-2]n[08-09]"), (Hosts{"r1n08", "r1n09", "r2n08", "r2n09"}));
  EXPECT_EQ(ExpandHostlist("a[1],b-x[2]-ib"), (Hosts{"a1", "b-x2-ib"}));
  EXPECT_EQ(ExpandHostlist("vm"), (Hosts{"vm"}));
  EXPECT_TRUE(ExpandHostlist("").empty());
}

TEST(SlurmHostlist, RejectsMalformedExpressions) {
  EXPECT_THROW(ExpandHostlist("node[1-3"), Error);
  EXPECT_THROW(ExpandHostlist("node1-3]"), Error);
  EXPECT_THROW(ExpandHostlist("node[3-1]"), Error);
  EXPECT_THROW(ExpandHostlist("node[a-b]"), Error);
  EXPECT_THROW(ExpandHostlist("a,,b"), Error);
  // A number past unsigned long is a malformed host list, not std::out_of_range.
  EXPECT_THROW(ExpandHostlist("t[01111111111111111111111111111111-01]"), Error);
  EXPECT_THROW(ExpandHostlist("t[1-99999999999999999999]"), Error);
  // Ranges multiply: 85 x 3 x 84041 x 5 names would take minutes and gigabytes.
  EXPECT_THROW(ExpandHostlist("g[01-84,04]u[1-3]p[01-84040,04]c[0-4]"), Error);
}

ClusterSpec TwoNodeSpec() {
  ClusterSpec spec;
  spec.transport = TransportKind::kSlurm;
  spec.nodes = {{"first", "10.0.0.1", 2, {}, {}}, {"second", "10.0.0.2", 2, {}, {}}};
  return spec;
}

// The two nodes placed on the allocation's first two.
ClusterSpec Placed(const Hosts& hosts) {
  return PlaceOnNodes(TwoNodeSpec(), hosts, {"addr0", "addr1", "addr2"}, "42", "dtrain-x");
}

TEST(SlurmAllocation, PlacedSpecGivesRanksTheAllocatedNodes) {
  const ClusterSpec spec = Placed({"n07", "n08", "n09"});
  EXPECT_TRUE(spec.slurm_placement.placed);
  EXPECT_EQ(spec.slurm_placement.job_id, "42");
  EXPECT_EQ(spec.slurm_placement.job_name, "dtrain-x");
  EXPECT_EQ(spec.nodes[1].slots, 2);
  EXPECT_EQ(spec.nodes[1].host, "second");  // the file's name labels the node in logs
  // MASTER_ADDR is the first allocated node's address; the node name is Slurm's.
  const RankPlan plan = MakeRankPlan(spec, {});
  EXPECT_EQ(plan.master_addr, "addr0");
  EXPECT_EQ(plan.ranks.at(1).env.at("MASTER_ADDR"), "addr0");
  EXPECT_EQ(plan.ranks.at(1).env.at("HOROVOD_HOSTNAME"), "n07");
  EXPECT_EQ(plan.ranks.at(2).env.at("HOROVOD_HOSTNAME"), "n08");
  EXPECT_THROW(Placed({"n1"}), Error);  // too few nodes
}

TEST(SlurmAllocation, NodesAnEarlierJobQuarantinedArePlacedLastOrExcluded) {
  EXPECT_EQ(PreferOthers({"n1", "n2", "n3", "n4"}, {"n2", "n9", "n1"}),
            (Hosts{"n3", "n4", "n1", "n2"}));
  EXPECT_EQ(PreferOthers({"n1", "n2"}, {}), (Hosts{"n1", "n2"}));
  SlurmSpec slurm;
  slurm.partition = "gpu";
  EXPECT_EQ(Excluding(slurm, {"n2", "n5"}).extra.at("exclude"), "n2,n5");
  slurm.extra["exclude"] = "n9";  // the cluster file's own exclusion is kept
  const std::string script = RenderSbatchScript(Excluding(slurm, {"n2"}), "dtrain-x", 2, 1);
  EXPECT_NE(script.find("#SBATCH --exclude=n9,n2\n"), std::string::npos) << script;
  EXPECT_EQ(script.find("--exclude", script.find("--exclude") + 1), std::string::npos);
}

// sinfo -h -N -o %N lists a node once per partition it is in; a node it does not list is not
// excluded (sbatch would refuse the exclusion whole); nothing listed (sinfo failed): every one.
TEST(SlurmAllocation, OnlyNodesSinfoListsAreExcluded) {
  const std::string listed = "n1\nn2\nn2\nc042 \n\n";
  EXPECT_EQ(NodesSlurmHas({"n2", "n9", "c042"}, listed), (Hosts{"n2", "c042"}));
  EXPECT_EQ(NodesSlurmHas({"n9"}, listed), Hosts{});
  EXPECT_EQ(NodesSlurmHas({"n2", "n9"}, ""), (Hosts{"n2", "n9"}));
}

// Ranks as the launcher would hand them over: node-major, MASTER_ADDR = first node's address.
std::vector<ProcessSpec> FourRanks(const ClusterSpec& spec) {
  std::vector<ProcessSpec> procs;
  for (int rank = 3; rank >= 0; --rank) {
    ProcessSpec p;
    p.id = rank;
    p.node_index = rank / 2;
    p.argv = {"python3", "train.py"};
    p.env = {{"RANK", std::to_string(rank)},
             {"MASTER_ADDR", spec.nodes[0].address},
             {"HOROVOD_HOSTNAME", spec.nodes[rank / 2].MachineName()},
             {"NCCL_DEBUG", "WARN"}};
    if (rank == 2) p.env["ONLY_TWO"] = "it's \"$(quoted)\"\n";
    p.python_path_head = "/work";
    procs.push_back(p);
  }
  return procs;
}

TEST(SlurmStep, PlacesTasksInBlockOrderAndSplitsTheEnvironment) {
  const ClusterSpec spec = Placed({"n07", "n08", "n09"});
  const SlurmStepPlan plan = PlanSlurmStep(FourRanks(spec), spec, "@m@");
  EXPECT_EQ(plan.task_ids, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.node_count, 2);
  EXPECT_EQ(plan.tasks_per_node, 2);
  EXPECT_EQ(plan.hosts, (Hosts{"n07", "n08"}));
  // Shared values are set once; MASTER_ADDR is the first allocated node's address.
  EXPECT_EQ(plan.env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(plan.env.at("MASTER_ADDR"), "addr0");
  EXPECT_EQ(plan.env.at("DTRAIN_PYTHONPATH_HEAD"), "/work");
  // Values that differ are keyed by task; the node name is Slurm's.
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_3_RANK"), "3");
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_1_HOROVOD_HOSTNAME"), "n07");
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_2_HOROVOD_HOSTNAME"), "n08");
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_2_ONLY_TWO"), "it's \"$(quoted)\"\n");
  EXPECT_EQ(plan.env.count("DTRAIN_SLURM_1_ONLY_TWO"), 0u);
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_VARY"), "HOROVOD_HOSTNAME ONLY_TWO RANK");
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_NTASKS"), "4");
}

TEST(SlurmStep, SrunArgvCarriesTheShapeAndTheCommandUnquoted) {
  const ClusterSpec spec = Placed({"n1", "n2"});
  const SlurmStepPlan plan = PlanSlurmStep(FourRanks(spec), spec, "@m@");
  const std::vector<std::string> argv = SrunArgv(plan, "42", "dtrain-x");
  const auto has = [&](const std::string& arg) {
    return std::find(argv.begin(), argv.end(), arg) != argv.end();
  };
  EXPECT_EQ(argv.front(), "srun");
  EXPECT_TRUE(has("--jobid=42"));
  EXPECT_TRUE(has("--nodes=2"));
  EXPECT_TRUE(has("--ntasks=4"));
  EXPECT_TRUE(has("--ntasks-per-node=2"));
  EXPECT_TRUE(has("--nodelist=n1,n2"));
  EXPECT_TRUE(has("--input=none"));
  EXPECT_EQ(std::vector<std::string>(argv.end() - 3, argv.end()),
            (std::vector<std::string>{"dtrain-task", "python3", "train.py"}));
}

// The rank probe runs beside the ranks: its step must not wait for the CPUs their step holds.
TEST(SlurmStep, ProcessesBesideTheRanksRunAsAnOverlappingStep) {
  const ClusterSpec spec = Placed({"n1", "n2"});
  std::vector<ProcessSpec> procs = FourRanks(spec);
  const auto overlaps = [&](const std::vector<ProcessSpec>& p) {
    const std::vector<std::string> argv = SrunArgv(PlanSlurmStep(p, spec, "@m@"), "42", "x");
    const auto flag = std::find(argv.begin(), argv.end(), "--overlap");
    return flag < std::find(argv.begin(), argv.end(), "dtrain-task");  // srun's, not the task's
  };
  EXPECT_FALSE(overlaps(procs));
  for (ProcessSpec& p : procs) p.beside_ranks = true;
  EXPECT_TRUE(overlaps(procs));
  procs[2].beside_ranks = false;  // one step cannot both overlap and not
  EXPECT_THROW(PlanSlurmStep(procs, spec, "@m@"), Error);
}

// After a node was lost, slurmctld keeps the step that ran there, with its CPUs, until the node
// is DOWN: the restart's ranks (and the checks before it) overlap it instead of waiting.
TEST(SlurmStep, EveryStepOverlapsOnceAStepLostANode) {
  ClusterSpec spec = Placed({"n1", "n2"});
  spec.slurm_placement.overlap_steps = true;
  EXPECT_TRUE(PlanSlurmStep(FourRanks(spec), spec, "@m@").overlap);
}

// With a node timeout every task says it is alive; the wrapper drops the variable before the
// command runs.
TEST(SlurmStep, HeartbeatIsAskedOfTheWrapperOnlyWithANodeTimeout) {
  const ClusterSpec spec = Placed({"n1", "n2"});
  EXPECT_EQ(PlanSlurmStep(FourRanks(spec), spec, "@m@").env.count("DTRAIN_SLURM_BEAT"), 0u);
  EXPECT_EQ(PlanSlurmStep(FourRanks(spec), spec, "@m@", true).env.at("DTRAIN_SLURM_BEAT"), "1");
  const std::string& script = SlurmTaskScript();
  EXPECT_LT(script.find("unset DTRAIN_SLURM_BEAT"), script.find("\"$@\" 2>&1"));
}

TEST(SlurmStep, RejectsShapesOneStepCannotRun) {
  ClusterSpec spec = Placed({"n1", "n2"});
  std::vector<ProcessSpec> procs = FourRanks(spec);
  procs[3].node_index = 2;  // not a node of the cluster
  EXPECT_THROW(PlanSlurmStep(procs, spec, "@m@"), Error);
  procs = FourRanks(spec);
  procs[1].argv = {"other"};
  EXPECT_THROW(PlanSlurmStep(procs, spec, "@m@"), Error);
  procs = FourRanks(spec);
  procs[0].env["NOT-AN.IDENT"] = "x";
  EXPECT_THROW(PlanSlurmStep(procs, spec, "@m@"), Error);
}

TEST(SlurmStep, UnevenNodesUseAHostfile) {
  ClusterSpec spec = Placed({"n1", "n2"});
  std::vector<ProcessSpec> procs = FourRanks(spec);
  procs.erase(procs.begin());  // ranks 2, 1, 0: two on the first node, one on the second
  const SlurmStepPlan plan = PlanSlurmStep(procs, spec, "@m@");
  EXPECT_EQ(plan.tasks_per_node, 0);
  EXPECT_EQ(plan.task_node, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(plan.task_local, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(SlurmHostfile(plan), "n1\nn1\nn2\n");
  const std::vector<std::string> argv = SrunArgv(plan, "", "dtrain-x");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--distribution=arbitrary"), argv.end());
  EXPECT_EQ(plan.env.at("DTRAIN_SLURM_NODES"), "0 0 1");
}

TEST(SlurmStep, ParsesLabelledLinesAndWrapperStatus) {
  SlurmTaskLine line = ParseSlurmTaskLine(" 12: hello: world", true, "@m@");
  EXPECT_EQ(line.task, 12);
  EXPECT_EQ(line.output, "hello: world\n");
  line = ParseSlurmTaskLine("3: partial@m@E 7", true, "@m@");
  EXPECT_EQ(line.task, 3);
  EXPECT_EQ(line.output, "partial");
  EXPECT_TRUE(line.exited);
  EXPECT_EQ(line.status, 7);
  line = ParseSlurmTaskLine("0: @m@B 17.2", true, "@m@");
  EXPECT_TRUE(line.started);
  EXPECT_EQ(line.step_id, "17.2");
  EXPECT_EQ(line.output, "");
  EXPECT_EQ(ParseSlurmTaskLine("srun: error: x", true, "@m@").task, -1);
  line = ParseSlurmTaskLine("5: @m@A", false, "@m@");  // the heartbeat, on srun's stderr
  EXPECT_EQ(line.task, 5);
  EXPECT_TRUE(line.alive);
  EXPECT_FALSE(line.started || line.exited);
  EXPECT_FALSE(ParseSlurmTaskLine("5: @m@Alive", false, "@m@").alive);
}

// `dtrain status` probes a Slurm job from another terminal: job.json names the job, its steps'
// name and the Slurm node of each node.
TEST(SlurmJobRecord, NamesTheJobAndTheNodesItRanOn) {
  testing::TempDir dir;
  JobRecord record;
  record.name = "j";
  record.transport = "slurm";
  const ClusterSpec spec = Placed({"n07", "n08"});
  record.nodes = spec.nodes;
  record.slurm = spec.slurm_placement;
  record.plan = MakeRankPlan(spec, {});
  WriteJobRecord(dir.path(), record);
  const JobSummary job = ReadJobSummary(dir.path());
  EXPECT_TRUE(job.slurm.placed);
  EXPECT_EQ(job.slurm.job_id, "42");
  EXPECT_EQ(job.slurm.job_name, "dtrain-x");
  EXPECT_EQ(job.rank_hosts.at(3), "second");
  EXPECT_EQ(job.node_machines,
            (std::map<std::string, std::string>{{"first", "n07"}, {"second", "n08"}}));
  record.transport = "ssh";
  record.nodes = TwoNodeSpec().nodes;
  record.slurm = {};
  WriteJobRecord(dir.path(), record);
  EXPECT_FALSE(ReadJobSummary(dir.path()).slurm.placed);
  EXPECT_TRUE(ReadJobSummary(dir.path()).node_machines.empty());
}

TEST(SlurmBatch, RendersTheTemplateWithTheSlurmSection) {
  SlurmSpec slurm;
  slurm.partition = "gpu";
  slurm.time = "00:10:00";
  slurm.account = "proj";
  slurm.extra = {{"qos", "high"}};
  const std::string script = RenderSbatchScript(slurm, "dtrain-j1", 3, 4);
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u);
  for (const char* line :
       {"#SBATCH --job-name=dtrain-j1\n", "#SBATCH --nodes=3\n", "#SBATCH --ntasks-per-node=4\n",
        "#SBATCH --partition=gpu\n", "#SBATCH --time=00:10:00\n", "#SBATCH --account=proj\n",
        "#SBATCH --qos=high\n"}) {
    EXPECT_NE(script.find(line), std::string::npos) << line;
  }
  EXPECT_EQ(script.find("{{"), std::string::npos);
  slurm.time = "1\n#SBATCH --x";
  EXPECT_THROW(RenderSbatchScript(slurm, "j", 1, 1), Error);
}

TEST(SlurmBatch, ReadsSqueueStates) {
  const SlurmJobState job = ParseSqueueLine("RUNNING|node[1-2]|None\n");
  EXPECT_EQ(job.state, "RUNNING");
  EXPECT_EQ(job.nodelist, "node[1-2]");
  EXPECT_EQ(ParseSqueueLine("PENDING||Resources").reason, "Resources");
  EXPECT_TRUE(IsFinishedJobState(""));
  EXPECT_TRUE(IsFinishedJobState("CANCELLED"));
  EXPECT_FALSE(IsFinishedJobState("PENDING"));
}

}  // namespace
}  // namespace dtrain
