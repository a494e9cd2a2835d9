// The doctor's rules and report on hand-built probe output: consistency across nodes (odd node
// named, majority value, remedy), pins, driver vs CUDA, GPUs vs slots, rendezvous, clock skew,
// unreachable nodes, exit status, and the text/JSON report.
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor/checks.h"
#include "doctor/report.h"

namespace dtrain {
namespace {

// Probe output of a healthy GPU node with the given NCCL and CUDA.
std::string ProbeText(const std::string& nccl = "2.21.5", const std::string& cuda = "12.4.1",
                      const std::string& driver = "550.54.15", int gpus = 2,
                      double time = 1700000000.0) {
  std::string out = "time=" + std::to_string(time) + "\nprobe_version=1\nhostname=h\ncpus=8\n";
  out += "mem_kib=100000000\nshm_kib=50000000\nworkdir=/w\nworkdir_exists=yes\nnofile=65536\n";
  for (int i = 0; i < gpus; ++i) out += "gpu=NVIDIA A100-SXM4-80GB, 81920 MiB, " + driver + "\n";
  out += "cuda_version_json={\"cuda\": {\"name\": \"CUDA SDK\", \"version\": \"" + cuda + "\"}}\n";
  out += "nccl_lib=/usr/lib/x86_64-linux-gnu/libnccl.so." + nccl + "\n";
  out += "python=/usr/bin/python3\npython_version=3.11.2\npythonpath_workdir=yes\n";
  out += "torch=2.4.0+cu124\ntorch_cuda=12.4\ntorch_nccl=(2, 21, 5)\n";
  out += "clip=/usr/bin/dtrain-clip\nclip_version=dtrain-clip 0.1.0\nrdzv=ok\nprobe_end=1\n";
  return out;
}

NodeFacts Node(const std::string& host, const std::string& probe, double arrival = 1700000000.0,
               int slots = 2) {
  NodeFacts n;
  n.host = host;
  n.address = "10.0.0." + std::to_string(host.size());
  n.slots = slots;
  ApplyProbeLines(SplitProbeOutput(probe), arrival, n);
  return n;
}

// gpu-b (10.0.0.12), which the probe did not reach, for `failure`.
NodeFacts NotReached(ReachFailure failure, const std::string& error) {
  NodeFacts n;
  n.host = "gpu-b";
  n.address = "10.0.0.12";
  n.failure = failure;
  n.error = error;
  return n;
}

ClusterSpec Spec(int nodes) {
  ClusterSpec spec;
  for (int i = 0; i < nodes; ++i) {
    NodeSpec n;
    n.host = "gpu-" + std::string(1, static_cast<char>('a' + i));
    n.slots = 2;
    spec.nodes.push_back(n);
  }
  return spec;
}

ProbeRun ProbeRunOf(std::vector<NodeFacts> nodes) {
  ProbeRun run;
  run.nodes = std::move(nodes);
  run.listener.started = true;
  run.master_addr = "10.0.0.5";
  run.master_port = 29500;
  return run;
}

const Finding* Find(const std::vector<Finding>& findings, const std::string& check,
                    Severity severity) {
  for (const auto& f : findings) {
    if (f.check == check && f.severity == severity) return &f;
  }
  return nullptr;
}

TEST(DoctorRules, ProbeOutputBecomesFacts) {
  NodeFacts n = Node("gpu-a", ProbeText() + "junk line\n=x\nBAD=1\n", 1699999999.5);
  EXPECT_TRUE(n.reached);
  EXPECT_EQ(n.gpus.size(), 2u);
  EXPECT_EQ(n.driver.text, "550.54.15");
  EXPECT_EQ(n.cuda.text, "12.4.1");
  EXPECT_EQ(n.Nccl().text, "2.21.5");
  EXPECT_EQ(n.torch.text, "2.4.0+cu124");
  EXPECT_EQ(n.torch.MajorMinor(), "2.4");
  EXPECT_EQ(n.torch_nccl.text, "2.21.5");
  EXPECT_EQ(n.clip.text, "0.1.0");
  EXPECT_NEAR(n.clock_offset_s, 0.5, 1e-6);
  // Without probe_end the node counts as not probed.
  NodeFacts cut = Node("gpu-b", "time=1\nhostname=x\n");
  EXPECT_FALSE(cut.reached);
}

TEST(DoctorRules, AllAlikeHasNoErrors) {
  ClusterSpec spec = Spec(3);
  ProbeRun run = ProbeRunOf(
      {Node("gpu-a", ProbeText()), Node("gpu-b", ProbeText()), Node("gpu-c", ProbeText())});
  auto findings = CheckCluster(spec, run);
  EXPECT_EQ(DoctorExitStatus(findings), 0);
  EXPECT_EQ(WorstSeverity(findings), Severity::kOk);
  ASSERT_TRUE(Find(findings, "nccl", Severity::kOk));
  EXPECT_NE(Find(findings, "nccl", Severity::kOk)->message.find("2.21.5"), std::string::npos);
}

TEST(DoctorRules, OddNcclNodeIsNamedWithMajorityAndRemedy) {
  ClusterSpec spec = Spec(3);
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", ProbeText()),
                             Node("gpu-c", ProbeText("2.18.5", "12.2.0"))});
  auto findings = CheckCluster(spec, run);
  EXPECT_EQ(DoctorExitStatus(findings), 1);
  const Finding* nccl = Find(findings, "nccl", Severity::kError);
  ASSERT_TRUE(nccl);
  EXPECT_EQ(nccl->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(nccl->message, "node gpu-c has NCCL 2.18.5, others 2.21.5");
  EXPECT_NE(nccl->remedy.find("LD_LIBRARY_PATH"), std::string::npos);
  const Finding* cuda = Find(findings, "cuda", Severity::kError);
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->message, "node gpu-c has CUDA 12.2.0, others 12.4.1");
  // A patch-level difference is not a difference.
  ProbeRun patch = ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", ProbeText("2.21.3"))});
  EXPECT_FALSE(Find(CheckCluster(Spec(2), patch), "nccl", Severity::kError));
}

TEST(DoctorRules, TorchNcclAgainstTheLibrary) {
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText("2.18.5"))});
  auto findings = CheckTorchNccl(run.nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(findings[0].message.find("2.21.5"), std::string::npos);
  EXPECT_NE(findings[0].message.find("2.18.5"), std::string::npos);
}

TEST(DoctorRules, PinsFromExpect) {
  ClusterSpec spec = Spec(2);
  spec.expect = {{"nccl", "2.21"}, {"torch", "2.3"}};
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", ProbeText())});
  auto findings = CheckPins(spec, run.nodes);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);     // nccl 2.21.5 matches 2.21
  EXPECT_EQ(findings[1].severity, Severity::kError);  // torch 2.4.0 does not match 2.3
  EXPECT_EQ(findings[1].nodes, (std::vector<std::string>{"gpu-a", "gpu-b"}));
}

TEST(DoctorRules, DriverTooOldForCuda) {
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText("2.21.5", "12.4.1", "470.82.01"))});
  auto findings = CheckDriverForCuda(run.nodes);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].severity, Severity::kError);
  EXPECT_NE(findings[0].message.find("470.82.01"), std::string::npos);
  EXPECT_NE(findings[0].message.find("525.60.13"), std::string::npos);
  ProbeRun fine = ProbeRunOf({Node("gpu-a", ProbeText("2.21.5", "12.4.1", "525.60.13"))});
  EXPECT_TRUE(CheckDriverForCuda(fine.nodes).empty());
}

TEST(DoctorRules, GpusAgainstSlotsAndListedGpus) {
  ClusterSpec spec = Spec(1);
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText(), 1700000000.0, /*slots=*/4)});
  EXPECT_TRUE(CheckGpus(spec, run.nodes).empty()) << "no GPUs asked for: nothing to check";
  spec.nodes[0].gpus = {0, 1, 2, 3};
  run.nodes[0].listed_gpus = {0, 1, 2, 3};
  auto findings = CheckGpus(spec, run.nodes);
  ASSERT_EQ(findings.size(), 3u);  // 2 GPUs for 4 slots; GPUs 2 and 3 do not exist
  EXPECT_NE(findings[0].message.find("2 GPUs for 4 slots"), std::string::npos);
  EXPECT_NE(findings[1].message.find("lists GPU 2"), std::string::npos);
  // A CPU node where GPUs are expected.
  ProbeRun cpu = ProbeRunOf({Node("gpu-a", ProbeText("2.21.5", "12.4.1", "550.54.15", 0))});
  auto none = CheckGpus(spec, cpu.nodes);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_NE(none[0].message.find("no NVIDIA GPU"), std::string::npos);
}

TEST(DoctorRules, GpusFromTheDriverWhenNvidiaSmiFails) {
  std::string proc =
      "time=1700000000\nprobe_version=1\nhostname=h\nworkdir_exists=yes\n"
      "driver_proc=NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
      "22:23:56 UTC 2024\ngpu_proc=NVIDIA A100-SXM4-80GB\ngpu_proc=NVIDIA A100-SXM4-80GB\n";
  NodeFacts quiet = Node("gpu-a", proc + "probe_end=1\n");
  ASSERT_EQ(quiet.gpus.size(), 2u);
  EXPECT_TRUE(quiet.gpus_from_proc);
  EXPECT_EQ(quiet.gpus[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(quiet.gpus[0].driver, "550.54.15");
  ClusterSpec spec = Spec(2);
  spec.nodes[0].gpus = {0, 1};
  NodeFacts broken = Node("gpu-b", proc +
                                       "nvidia_smi=/usr/bin/nvidia-smi\nnvidia_smi_error=Failed to "
                                       "initialize NVML: Driver/library version mismatch\n"
                                       "probe_end=1\n");
  auto findings = CheckGpus(spec, {quiet, broken});
  ASSERT_EQ(findings.size(), 1u) << "two GPUs for two slots on both; only the failing nvidia-smi";
  EXPECT_EQ(findings[0].nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_NE(findings[0].message.find("version mismatch"), std::string::npos);
  // nvidia-smi's list wins where it works.
  NodeFacts both = Node("gpu-c", ProbeText("2.21.5", "12.4.1", "550.54.15", 1) +
                                     "gpu_proc=NVIDIA A100-SXM4-80GB\ngpu_proc=X\n");
  EXPECT_EQ(both.gpus.size(), 1u);
  EXPECT_FALSE(both.gpus_from_proc);
}

TEST(DoctorRules, UnreachableNodeIsAnErrorAndOthersAreStillChecked) {
  const std::string refused = "ssh: connect to 10.0.0.12:22: Connection refused";
  const NodeFacts down = NotReached(ClassifyReachError(refused), refused);
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText()), down, Node("gpu-c", ProbeText("2.18.5"))});
  auto findings = CheckCluster(Spec(3), run);
  const Finding* reach = Find(findings, "reach", Severity::kError);
  ASSERT_TRUE(reach);
  EXPECT_EQ(reach->nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_NE(reach->message.find("refused"), std::string::npos);
  EXPECT_NE(reach->remedy.find("sshd"), std::string::npos);
  NodeFacts late;
  late.host = "gpu-d";
  late.address = "10.0.0.14";
  late.error = "node gpu-d (10.0.0.14): ssh: cannot connect to port 22 within 5 s (timeout)";
  late.failure = ClassifyReachError(late.error);
  auto twice = CheckReach({late});
  ASSERT_EQ(twice.size(), 1u);
  EXPECT_EQ(twice[0].message,
            "node gpu-d (10.0.0.14) could not be probed: timeout: ssh: cannot connect to port 22 "
            "within 5 s (timeout)");
  ASSERT_TRUE(Find(findings, "nccl", Severity::kError)) << "the reached nodes are compared";
}

// With one of two nodes down, an agreeing fact holds on the node that answered, not "on the only
// node" of the cluster.
TEST(DoctorRules, AgreementCountsTheNodesCompared) {
  const NodeFacts down =
      NotReached(ReachFailure::kTimeout, "no answer within 5 s (the probe was stopped)");
  auto findings = CheckConsistency({Node("gpu-a", ProbeText()), down});
  const Finding* nccl = Find(findings, "nccl", Severity::kOk);
  ASSERT_TRUE(nccl);
  EXPECT_EQ(nccl->message, "NCCL 2.21.5 on 1 of 2 nodes");
  auto alone = CheckConsistency({Node("gpu-a", ProbeText())});
  ASSERT_TRUE(Find(alone, "nccl", Severity::kOk));
  EXPECT_EQ(Find(alone, "nccl", Severity::kOk)->message, "NCCL 2.21.5 on the only node");
}

// The same for the ok lines of the rendezvous, the workdir and the pins: with gpu-b not reached
// they speak for the nodes checked, not "every node"; with every node reached, for every node.
TEST(DoctorRules, OkLinesSpeakOnlyForTheNodesChecked) {
  const NodeFacts down =
      NotReached(ReachFailure::kCutShort, "the doctor was interrupted before its probe ended");
  ClusterSpec spec = Spec(3);
  spec.expect = {{"nccl", "2.21"}};
  const auto message = [](const std::vector<Finding>& findings, const std::string& check) {
    const Finding* f = Find(findings, check, Severity::kOk);
    return f ? f->message : "(no ok line for " + check + ")";
  };
  const auto some = CheckCluster(
      spec, ProbeRunOf({Node("gpu-a", ProbeText()), down, Node("gpu-c", ProbeText())}));
  EXPECT_EQ(message(some, "rendezvous"), "the 2 of 3 nodes checked connect to 10.0.0.5:29500");
  EXPECT_EQ(message(some, "workdir"),
            "the workdir exists and is importable on the 2 of 3 nodes checked");
  EXPECT_EQ(message(some, "expect"), "nccl matches the pin 2.21 on the 2 of 3 nodes checked");
  const auto all =
      CheckCluster(spec, ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", ProbeText()),
                                     Node("gpu-c", ProbeText())}));
  EXPECT_EQ(message(all, "rendezvous"), "every node connects to 10.0.0.5:29500");
  EXPECT_EQ(message(all, "workdir"), "the workdir exists and is importable on every node");
  EXPECT_EQ(message(all, "expect"), "nccl matches the pin 2.21 on every node");
}

TEST(DoctorRules, ReachFailureReasons) {
  EXPECT_EQ(ClassifyReachError("node b: ssh: authentication failed for root@10.0.0.2 (publickey)"),
            ReachFailure::kAuth);
  EXPECT_EQ(ClassifyReachError("ssh: host key mismatch for 10.0.0.12 (expected SHA256:abc)"),
            ReachFailure::kHostKey);
  EXPECT_EQ(ClassifyReachError("ssh: connection to 10.0.0.9:22 timed out after 5 s"),
            ReachFailure::kTimeout);
  EXPECT_EQ(ClassifyReachError("Connection refused"), ReachFailure::kRefused);
  EXPECT_EQ(ClassifyReachError("could not resolve hostname gpu-x"), ReachFailure::kUnresolved);
  // The ssh transport's own words for its two timeouts; the second mentions authentication.
  EXPECT_EQ(ClassifyReachError("node b (10.0.0.2): ssh: cannot connect to port 22 within 5 s "
                               "(ssh.connect_timeout): no answer"),
            ReachFailure::kTimeout);
  EXPECT_EQ(ClassifyReachError("node b (10.0.0.2): ssh: no reply while authenticating within 5 s "
                               "(ssh.connect_timeout)"),
            ReachFailure::kTimeout);
}

TEST(DoctorRules, TorchBuildsAndHorovodBuildsAgreeAcrossNodes) {
  std::string other = ProbeText();
  other.replace(other.find("torch_cuda=12.4\ntorch_nccl=(2, 21, 5)"), 37,
                "torch_cuda=12.1\ntorch_nccl=(2, 18, 1)");
  const std::string hvd =
      "horovod=0.28.1\nhorovod_frameworks=torch\nhorovod_controllers=gloo,mpi\n";
  std::string no_gloo = hvd;
  no_gloo.replace(no_gloo.find("gloo,mpi"), 8, "mpi");
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText() + hvd), Node("gpu-b", ProbeText() + hvd),
                             Node("gpu-c", other + no_gloo)});
  auto findings = CheckConsistency(run.nodes);
  const Finding* cuda = Find(findings, "torch-cuda", Severity::kWarning);
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(cuda->fact, "torch");
  EXPECT_NE(cuda->message.find("12.1, others 12.4"), std::string::npos) << cuda->message;
  const Finding* nccl = Find(findings, "torch-nccl-build", Severity::kError);
  ASSERT_TRUE(nccl);
  EXPECT_EQ(nccl->nodes, std::vector<std::string>{"gpu-c"});
  const Finding* horovod = Find(findings, "horovod-build", Severity::kError);
  ASSERT_TRUE(horovod);
  EXPECT_EQ(horovod->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_NE(horovod->message.find("torch/mpi/none, others torch/gloo,mpi/none"), std::string::npos)
      << horovod->message;
  // The same frameworks and controllers with other tensor operations (NCCL on one node only).
  std::string nccl_ops = hvd + "horovod_ops=nccl,gloo\n";
  const auto ops =
      CheckConsistency(ProbeRunOf({Node("gpu-a", ProbeText() + hvd + "horovod_ops=gloo\n"),
                                   Node("gpu-b", ProbeText() + hvd + "horovod_ops=gloo\n"),
                                   Node("gpu-c", ProbeText() + nccl_ops)})
                           .nodes);
  const Finding* by_ops = Find(ops, "horovod-build", Severity::kError);
  ASSERT_TRUE(by_ops);
  EXPECT_EQ(by_ops->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_NE(by_ops->message.find("torch/gloo,mpi/nccl,gloo, others torch/gloo,mpi/gloo"),
            std::string::npos)
      << by_ops->message;
  EXPECT_TRUE(Find(findings, "torch", Severity::kOk)) << "torch 2.4 itself agrees";
  // Build details are compared only where the package is there: no Horovod at all is no finding.
  EXPECT_FALSE(Find(CheckConsistency(ProbeRunOf({Node("gpu-a", ProbeText())}).nodes),
                    "horovod-build", Severity::kOk));
}

// dtrain-clip that does not answer in time or is killed at its start is not told to install its
// libraries: the probe says which (templates/probe.sh, probe_clip), and the remedy follows.
TEST(DoctorRules, AClipThatTimesOutOrIsKilledGetsTheRemedyForThat) {
  const auto with = [](const std::string& error) {
    std::string probe = ProbeText();
    probe.replace(probe.find("clip_version=dtrain-clip 0.1.0"), 30, "clip_error=" + error);
    return probe;
  };
  ProbeRun run = ProbeRunOf({Node("gpu-a", with("did not answer --version within 20 s")),
                             Node("gpu-b", with("killed by SIGKILL (signal 9)")),
                             Node("gpu-c", with("killed by SIGSEGV (signal 11)")),
                             Node("gpu-d", with("dtrain-clip: error while loading shared "
                                                "libraries: libtorch.so"))});
  std::map<std::string, std::string> remedy;
  for (const Finding& f : CheckCluster(Spec(4), run)) {
    if (f.check == "clip" && f.message.find("does not start") != std::string::npos)
      remedy[f.nodes.at(0)] = f.remedy;
  }
  ASSERT_EQ(remedy.size(), 4u);
  EXPECT_NE(remedy["gpu-a"].find("what keeps the node busy"), std::string::npos) << remedy["gpu-a"];
  EXPECT_NE(remedy["gpu-b"].find("OOM killer"), std::string::npos) << remedy["gpu-b"];
  EXPECT_NE(remedy["gpu-c"].find("crashed at its start"), std::string::npos) << remedy["gpu-c"];
  EXPECT_NE(remedy["gpu-d"].find("`ldd` on it"), std::string::npos) << remedy["gpu-d"];
}

TEST(DoctorRules, BrokenPythonToolsAndClipAreNamedWithTheirError) {
  const std::string broken_torch = "ImportError: libcudart.so.12: cannot open shared object file";
  std::string bad = ProbeText();
  bad.replace(bad.find("torch=2.4.0+cu124\ntorch_cuda=12.4\ntorch_nccl=(2, 21, 5)\n"), 56,
              "torch_error=" + broken_torch + "\nhorovod_error=ImportError: no torch\n");
  bad.replace(bad.find("clip_version=dtrain-clip 0.1.0"), 30,
              "clip_error=dtrain-clip: error while loading shared libraries: libtorch.so");
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", bad), Node("gpu-c", bad)});
  EXPECT_EQ(run.nodes[1].torch_error, broken_torch);

  ClusterSpec python_job = Spec(3);
  python_job.job.command = {"/opt/venv/bin/python3", "train.py"};
  EXPECT_TRUE(JobUsesPython(python_job));
  auto findings = CheckCluster(python_job, run);
  const Finding* torch = Find(findings, "import", Severity::kError);
  ASSERT_TRUE(torch);
  EXPECT_EQ(torch->fact, "torch");
  EXPECT_EQ(torch->nodes, (std::vector<std::string>{"gpu-b", "gpu-c"})) << "one finding per error";
  EXPECT_NE(torch->message.find(broken_torch), std::string::npos) << torch->message;
  auto clip = std::find_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.check == "clip" && f.message.find("does not start") != std::string::npos;
  });
  ASSERT_NE(clip, findings.end());
  EXPECT_EQ(clip->severity, Severity::kWarning) << "a python job does not need dtrain-clip";
  EXPECT_NE(clip->message.find("libtorch.so"), std::string::npos);
  std::string table = RenderTextReport(python_job, run, findings, false);
  EXPECT_NE(table.find("fails*"), std::string::npos) << table;

  ClusterSpec clip_job = Spec(3);  // no job command: dtrain-clip
  EXPECT_FALSE(JobUsesPython(clip_job));
  findings = CheckCluster(clip_job, run);
  EXPECT_TRUE(Find(findings, "import", Severity::kWarning));
  EXPECT_FALSE(Find(findings, "import", Severity::kError));
  ASSERT_TRUE(Find(findings, "clip", Severity::kError));
  EXPECT_EQ(Find(findings, "clip", Severity::kError)->nodes,
            (std::vector<std::string>{"gpu-b", "gpu-c"}));

  std::string no_python = ProbeText();
  no_python.replace(no_python.find("python=/usr/bin/python3"), 23,
                    "python_error=no python (tried /opt/venv/bin/python3)");
  python_job.python = "/opt/venv/bin/python3";
  findings =
      CheckCluster(python_job, ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", no_python)}));
  const Finding* interpreter = Find(findings, "interpreter", Severity::kError);
  ASSERT_TRUE(interpreter);
  EXPECT_EQ(interpreter->nodes, std::vector<std::string>{"gpu-b"});
}

TEST(DoctorRules, RendezvousPerNode) {
  std::string blocked = ProbeText();
  blocked.replace(blocked.find("rdzv=ok"), 7, "rdzv=unreachable\nrdzv_detail=No route to host");
  ProbeRun run = ProbeRunOf({Node("gpu-a", ProbeText()), Node("gpu-b", blocked)});
  auto findings = CheckRendezvous(run);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kError);
  EXPECT_EQ(findings[0].nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_NE(findings[0].message.find("10.0.0.5:29500"), std::string::npos);
  EXPECT_NE(findings[0].message.find("No route to host"), std::string::npos);
  run.listener = {false, "port 29500: Address already in use"};
  auto busy = CheckRendezvous(run);
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].severity, Severity::kError);
  EXPECT_EQ(busy[0].nodes, std::vector<std::string>{"gpu-a"});
}

TEST(DoctorRules, ClockSkewIsAWarningAboveOneSecond) {
  ProbeRun close =
      ProbeRunOf({Node("gpu-a", ProbeText("2.21.5", "12.4.1", "550.54.15", 2, 100.0), 100.0),
                  Node("gpu-b", ProbeText("2.21.5", "12.4.1", "550.54.15", 2, 100.3), 100.0)});
  auto ok = CheckClockSkew(close.nodes);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].severity, Severity::kOk);
  ProbeRun skewed =
      ProbeRunOf({Node("gpu-a", ProbeText("2.21.5", "12.4.1", "550.54.15", 2, 100.0), 100.0),
                  Node("gpu-b", ProbeText("2.21.5", "12.4.1", "550.54.15", 2, 100.0), 100.0),
                  Node("gpu-c", ProbeText("2.21.5", "12.4.1", "550.54.15", 2, 103.0), 100.0)});
  auto findings = CheckCluster(Spec(3), skewed);
  const Finding* clock = Find(findings, "clock", Severity::kWarning);
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(DoctorExitStatus(findings), 0) << "a warning keeps exit status 0";
}

TEST(DoctorRules, WorkdirAndPythonPath) {
  std::string bad = ProbeText();
  bad.replace(bad.find("pythonpath_workdir=yes"), 22, "pythonpath_workdir=no");
  std::string missing = ProbeText();
  missing.replace(missing.find("workdir_exists=yes"), 18, "workdir_exists=no");
  auto findings =
      CheckWorkdir({Node("gpu-a", ProbeText()), Node("gpu-b", bad), Node("gpu-c", missing)});
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_EQ(findings[0].check, "pythonpath");
  EXPECT_EQ(findings[1].nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(findings[1].check, "workdir");
}

TEST(DoctorRules, ReportMarksOddCellsAndJsonCarriesEverything) {
  ClusterSpec spec = Spec(3);
  ProbeRun run = ProbeRunOf(
      {Node("gpu-a", ProbeText()), Node("gpu-b", ProbeText()), Node("gpu-c", ProbeText("2.18.5"))});
  auto findings = CheckCluster(spec, run);
  std::string plain = RenderTextReport(spec, run, findings, /*colour=*/false);
  EXPECT_EQ(plain.find('\033'), std::string::npos);
  EXPECT_NE(plain.find("2.18.5*"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("2.21.5*"), std::string::npos) << plain;
  EXPECT_NE(plain.find("node gpu-c has NCCL 2.18.5, others 2.21.5"), std::string::npos);
  std::string coloured = RenderTextReport(spec, run, findings, /*colour=*/true);
  EXPECT_NE(coloured.find("\033[31m2.18.5"), std::string::npos);
  auto doc = nlohmann::json::parse(RenderJsonReport(spec, run, findings));
  ASSERT_EQ(doc["nodes"].size(), 3u);
  EXPECT_EQ(doc["nodes"][2]["facts"]["nccl"], "2.18.5");
  EXPECT_EQ(doc["nodes"][0]["facts"]["gpus"].size(), 2u);
  EXPECT_EQ(doc["summary"]["exit_status"], 1);
  bool named = false;
  for (const auto& f : doc["findings"]) {
    named = named || (f["check"] == "nccl" && f["severity"] == "error" && f["nodes"][0] == "gpu-c");
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace dtrain
