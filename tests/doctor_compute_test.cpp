// `dtrain doctor --compute`'s verdict on the lines `dtrain-clip check` prints (its format:
// "PASS  <name padded to 17> <detail>", "SPEED  <name padded to 15> <value> <unit> (<detail>)")
// and the marker the doctor's rank command adds: a device with a FAIL line, one that ran past the
// limit, one where the check could not run, all passing, and a device slower than its peers.
#include <cstdio>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "doctor/compute_verdict.h"

namespace dtrain {
namespace {

using testing::HasSubstr;

const char* kPassLog =
    "dtrain-clip check on cuda:0\n"
    "PASS  attention         SDPA in bfloat16 against matmul and softmax in float32: values "
    "4.1e-03, gradient 5.0e-03 (limit 3e-02)\n"
    "PASS  attention-causal  the same, causal: values 3.9e-03, gradient 4.8e-03 (limit 3e-02)\n"
    "PASS  patch-embedding   one matrix product against the convolution: values 2.0e-03, "
    "weight gradient 1.1e-03 (limit 1e-02)\n"
    "PASS  layer-norm        15 of 15 LayerNorm calls aligned; kernels: "
    "vectorized_layer_norm_kernel\n"
    "PASS  captured-step     3 steps: losses within 1e-2, parameters within 2 x lr a step\n"
    "every check passed\n"
    "dtrain-check-exit 0\n";

RankComputeCheck Parsed(const std::string& log, int rank, const std::string& node) {
  RankComputeCheck r = ParseComputeCheckLog(log);
  r.rank = rank;
  r.node = node;
  return r;
}

TEST(DoctorCompute, ReadsTheDeviceEachCheckAndTheStatus) {
  const RankComputeCheck r = ParseComputeCheckLog(kPassLog);
  EXPECT_EQ(r.device, "cuda:0");
  EXPECT_EQ(r.exit_status, 0);
  ASSERT_EQ(r.checks.size(), 5u);
  EXPECT_EQ(r.checks[0].name, "attention");
  EXPECT_TRUE(r.checks[0].passed);
  EXPECT_THAT(r.checks[0].detail, HasSubstr("values 4.1e-03"));
  EXPECT_EQ(r.checks[4].name, "captured-step");
}

TEST(DoctorCompute, AllPassingIsOneOkFinding) {
  const std::vector<Finding> f = JudgeComputeChecks(
      {Parsed(kPassLog, 0, "gpu-a"), Parsed(kPassLog, 1, "gpu-a"), Parsed(kPassLog, 2, "gpu-b")},
      300, "/logs/job");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kOk);
  EXPECT_EQ(f[0].check, "compute");
  EXPECT_THAT(f[0].message, HasSubstr("3 rank(s) on 2 node(s) (cuda:0)"));
}

TEST(DoctorCompute, AWrongResultAHangAndAMissingProgramAreErrorsNamingTheirNodes) {
  std::string wrong = kPassLog;
  const std::string pass_line = "PASS  attention         SDPA";
  wrong.replace(wrong.find(pass_line), pass_line.size(), "FAIL  attention         SDPA");
  wrong.replace(wrong.find("values 4.1e-03"), 14, "values 8.7e-01");
  wrong.replace(wrong.find("every check passed"), 18, "1 check(s) failed");
  wrong.replace(wrong.find("dtrain-check-exit 0"), 19, "dtrain-check-exit 1");
  const std::string hung =
      "dtrain-clip check on cuda:3\n"
      "PASS  attention         SDPA ...\n"
      "dtrain-check-exit 124\n";
  const std::string missing =
      "error: no dtrain-clip beside dtrain (/opt/dtrain/bin), on PATH, in /usr/local/bin, "
      "/usr/bin or ~/.local/bin\n"
      "dtrain-check-exit 127\n";
  const std::string killed = "dtrain-clip check on cuda:0\n";  // no marker: the rank was ended
  const std::vector<Finding> f = JudgeComputeChecks(
      {Parsed(kPassLog, 0, "gpu-a"), Parsed(wrong, 1, "gpu-b"), Parsed(hung, 2, "gpu-c"),
       Parsed(missing, 3, "gpu-d"), Parsed(killed, 4, "gpu-e")},
      120, "/logs/doctor-compute-1");
  ASSERT_EQ(f.size(), 4u);  // no ok finding while any rank is wrong
  for (const Finding& one : f) EXPECT_EQ(one.severity, Severity::kError);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_EQ(f[0].message,
            "node gpu-b (cuda:0, rank 1) computes wrong results: attention: SDPA in bfloat16 "
            "against matmul and softmax in float32: values 8.7e-01, gradient 5.0e-03 (limit "
            "3e-02)");
  EXPECT_THAT(f[0].remedy, HasSubstr("--exclude-bad"));
  EXPECT_EQ(f[1].nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(f[1].message,
            "the compute check did not finish within 120 s on node gpu-c (cuda:3, rank 2): the "
            "GPU may be hung");
  EXPECT_EQ(f[2].nodes, std::vector<std::string>{"gpu-d"});
  EXPECT_EQ(f[2].message,
            "the compute check could not run on node gpu-d (rank 3) (status 127): error: no "
            "dtrain-clip beside dtrain (/opt/dtrain/bin), on PATH, in /usr/local/bin, /usr/bin "
            "or ~/.local/bin");
  EXPECT_THAT(f[2].remedy, HasSubstr("/logs/doctor-compute-1"));
  EXPECT_EQ(f[3].nodes, std::vector<std::string>{"gpu-e"});
  EXPECT_THAT(f[3].message, HasSubstr("could not run on node gpu-e (cuda:0, rank 4) (no result)"));
}

// A check every device fails is the software's, not every GPU's: one error naming no node (so
// --exclude-bad keeps them all); a device that also fails another check is still named for it.
TEST(DoctorCompute, ACheckEveryDeviceFailsNamesNoNode) {
  auto failing = [](const std::string& name, const std::string& values) {
    std::string log = kPassLog;
    const std::string pass = "PASS  " + name;
    log.replace(log.find(pass), pass.size(), "FAIL  " + name);
    if (!values.empty()) log.replace(log.find("values 4.1e-03"), 14, values);
    log.replace(log.find("dtrain-check-exit 0"), 19, "dtrain-check-exit 1");
    return log;
  };
  std::string both = failing("layer-norm", "");
  const std::string pass_attention = "PASS  attention         SDPA";
  both.replace(both.find(pass_attention), pass_attention.size(), "FAIL  attention         SDPA");
  const std::vector<Finding> f =
      JudgeComputeChecks({Parsed(failing("layer-norm", ""), 0, "gpu-a"),
                          Parsed(failing("layer-norm", ""), 1, "gpu-b"), Parsed(both, 2, "gpu-c")},
                         300, "/logs/job");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_TRUE(f[0].nodes.empty());
  EXPECT_THAT(f[0].message, HasSubstr("every device fails layer-norm (3 rank(s) on 3 node(s)), "
                                      "e.g. node gpu-a (cuda:0, rank 0): 15 of 15"));
  EXPECT_EQ(f[1].nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_THAT(f[1].message, HasSubstr("node gpu-c (cuda:0, rank 2) computes wrong results: "
                                      "attention: "));
  EXPECT_THAT(f[1].message, testing::Not(HasSubstr("layer-norm")));
  // One device alone failing is that device's.
  const std::vector<Finding> one = JudgeComputeChecks({Parsed(both, 0, "gpu-a")}, 300, "/j");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].nodes, std::vector<std::string>{"gpu-a"});
}

// A log with the check's SPEED lines: `matmul` GFLOP/s and `copy` GB/s.
std::string WithSpeed(double matmul, double copy, const std::string& device = "cuda:0") {
  std::string log = kPassLog;
  log.replace(log.find("cuda:0"), 6, device);
  char lines[400];
  std::snprintf(lines, sizeof lines,
                "SPEED  matmul          %.4g GFLOP/s (bfloat16 8192 x 8192, fastest of 5 runs "
                "1.652 ms)\n"
                "SPEED  memory-copy     %.4g GB/s (512 MiB within the GPU, fastest of 5 runs "
                "0.201 ms)\n",
                matmul, copy);
  log.insert(log.find("dtrain-check-exit"), lines);
  return log;
}

TEST(DoctorCompute, ReadsTheSpeedLines) {
  const RankComputeCheck r = ParseComputeCheckLog(WithSpeed(665500, 2671));
  ASSERT_EQ(r.speeds.size(), 2u);
  EXPECT_EQ(r.speeds[0].name, "matmul");
  EXPECT_DOUBLE_EQ(r.speeds[0].value, 665500);
  EXPECT_EQ(r.speeds[0].unit, "GFLOP/s");
  EXPECT_EQ(r.speeds[0].detail, "bfloat16 8192 x 8192, fastest of 5 runs 1.652 ms");
  EXPECT_EQ(r.speeds[1].name, "memory-copy");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_TRUE(RankPassed(r));
  // A line that does not read as a figure is not one.
  std::string broken = kPassLog;
  broken.insert(broken.find("dtrain-check-exit"), "SPEED  matmul nan-ish\n");
  EXPECT_TRUE(ParseComputeCheckLog(broken).speeds.empty());
}

// Against the middle device (of four, the faster middle one: 650), one at 71% is slow, one at
// 86% is not; the slow one is named with the figure it is slow in, and only it.
TEST(DoctorCompute, ADeviceBelowItsPeersIsSlowAndNamed) {
  const std::vector<Finding> f = JudgeComputeChecks(
      {Parsed(WithSpeed(650, 2600), 0, "gpu-a"), Parsed(WithSpeed(660, 2700), 1, "gpu-b"),
       Parsed(WithSpeed(462, 2650), 2, "gpu-c"), Parsed(WithSpeed(561, 2690), 3, "gpu-d")},
      300, "/logs/job");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::kOk);  // the computations matched
  EXPECT_EQ(f[1].severity, Severity::kError);
  EXPECT_EQ(f[1].nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_THAT(f[1].message, HasSubstr("node gpu-c (cuda:0, rank 2) is slow: matmul 462 GFLOP/s, "
                                      "71% of its peers' 650 (bfloat16 8192 x 8192"));
  EXPECT_THAT(f[1].message, testing::Not(HasSubstr("memory-copy")));
  EXPECT_THAT(f[1].remedy, HasSubstr("clock"));
  // Of two, the slower one is named against the faster.
  const std::vector<Finding> two = JudgeComputeChecks(
      {Parsed(WithSpeed(650, 2600), 0, "gpu-a"), Parsed(WithSpeed(650, 1000), 1, "gpu-b")}, 300,
      "/j");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_THAT(two[1].message, HasSubstr("memory-copy 1000 GB/s, 38% of its peers' 2600"));
}

// CUDA devices are compared within one GPU model: two H100s and an A100 at 60% of their speed
// are all fine; an H100 at 60% of the other H100's is slow.
TEST(DoctorCompute, GpusOfAnotherModelAreNotCalledSlow) {
  auto gpu = [](double matmul, int rank, const std::string& node, const std::string& model) {
    RankComputeCheck r = Parsed(WithSpeed(matmul, 2600), rank, node);
    r.model = model;
    return r;
  };
  const std::string h100 = "NVIDIA H100 80GB HBM3", a100 = "NVIDIA A100-SXM4-80GB";
  const std::vector<Finding> mixed = JudgeComputeChecks(
      {gpu(650, 0, "h-1", h100), gpu(655, 1, "h-2", h100), gpu(390, 2, "a-1", a100)}, 300, "/j");
  std::vector<std::string> ok;
  for (const Finding& finding : mixed) {
    EXPECT_EQ(finding.severity, Severity::kOk) << finding.message;
    ok.push_back(finding.message);
  }
  ASSERT_EQ(ok.size(), 3u);
  EXPECT_THAT(ok[1], HasSubstr("one cuda (NVIDIA A100-SXM4-80GB) device, its speed compared "
                               "with no other: matmul 390 GFLOP/s"));
  EXPECT_THAT(ok[2], HasSubstr("the 2 cuda (NVIDIA H100 80GB HBM3) devices are alike in speed"));
  const std::vector<Finding> slow = JudgeComputeChecks(
      {gpu(650, 0, "h-1", h100), gpu(390, 1, "h-2", h100), gpu(390, 2, "a-1", a100)}, 300, "/j");
  ASSERT_EQ(slow.size(), 3u);
  EXPECT_EQ(slow[2].severity, Severity::kError);
  EXPECT_EQ(slow[2].nodes, std::vector<std::string>{"h-2"});
}

// The check names each CUDA device's model beside it, and that is the model its speed is compared
// within: on a node with an H100 and an A100 (the probe reads one model per node), the A100 at 60%
// of the H100s is not slow; a check that names none keeps the model the doctor gave it.
TEST(DoctorCompute, EachGpuIsComparedWithinTheModelItsCheckNamed) {
  auto gpu = [](double matmul, int rank, const std::string& node, const std::string& device) {
    return Parsed(WithSpeed(matmul, 2600, device), rank, node);
  };
  const RankComputeCheck h = gpu(650, 0, "mixed", "cuda:0 (NVIDIA H100 80GB HBM3)");
  EXPECT_EQ(h.device, "cuda:0");
  EXPECT_EQ(h.model, "NVIDIA H100 80GB HBM3");
  const RankComputeCheck plain = gpu(650, 0, "mixed", "cuda:0");
  EXPECT_EQ(plain.device, "cuda:0");
  EXPECT_EQ(plain.model, "");
  const std::vector<Finding> mixed =
      JudgeComputeChecks({h, gpu(390, 1, "mixed", "cuda:1 (NVIDIA A100-SXM4-80GB)"),
                          gpu(655, 2, "h-2", "cuda:0 (NVIDIA H100 80GB HBM3)")},
                         300, "/j");
  for (const Finding& finding : mixed) {
    EXPECT_EQ(finding.severity, Severity::kOk) << finding.message;
  }
  ASSERT_EQ(mixed.size(), 3u);
  EXPECT_THAT(mixed[1].message, HasSubstr("one cuda (NVIDIA A100-SXM4-80GB) device"));
  EXPECT_THAT(mixed[2].message, HasSubstr("the 2 cuda (NVIDIA H100 80GB HBM3) devices are alike"));
}

// Alike devices are one ok line with each figure's range; devices of another kind are not
// compared with them; a device that failed a check is left out of the comparison (its error
// says enough).
TEST(DoctorCompute, AlikeDevicesAreOneOkLinePerKind) {
  std::string failed = WithSpeed(10, 10);
  failed.replace(failed.find("PASS  layer-norm"), 16, "FAIL  layer-norm");
  const std::vector<Finding> f = JudgeComputeChecks(
      {Parsed(WithSpeed(650, 2600), 0, "gpu-a"), Parsed(WithSpeed(640, 2650), 1, "gpu-b"),
       Parsed(WithSpeed(30, 5, "cpu"), 2, "cpu-a"), Parsed(failed, 3, "gpu-c")},
      300, "/logs/job");
  std::vector<std::string> ok;
  for (const Finding& finding : f) {
    if (finding.severity == Severity::kOk) ok.push_back(finding.message);
    if (finding.severity == Severity::kError) {
      EXPECT_EQ(finding.nodes, std::vector<std::string>{"gpu-c"});
      EXPECT_THAT(finding.message, testing::Not(HasSubstr("slow")));
    }
  }
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_THAT(ok[0], HasSubstr("one cpu device, its speed compared with no other: matmul 30 "
                               "GFLOP/s, memory-copy 5 GB/s"));
  // CPU devices are slow below half their peers' matrix product, not below 80%; their copies
  // (the host's shared memory bandwidth) are reported, not judged.
  const std::vector<Finding> cpus = JudgeComputeChecks(
      {Parsed(WithSpeed(30, 10, "cpu"), 0, "a"), Parsed(WithSpeed(16, 10, "cpu"), 1, "b"),
       Parsed(WithSpeed(12, 2, "cpu"), 2, "c"), Parsed(WithSpeed(31, 2, "cpu"), 3, "d")},
      300, "/j");
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus[1].nodes, std::vector<std::string>{"c"});
  EXPECT_THAT(cpus[1].message, HasSubstr("is slow: matmul 12 GFLOP/s, 40% of its peers' 30"));
  EXPECT_THAT(cpus[1].message, testing::Not(HasSubstr("memory-copy")));
  EXPECT_THAT(ok[1], HasSubstr("the 2 cuda devices are alike in speed (none below 80% of the "
                               "middle one): matmul 640-650 GFLOP/s, memory-copy 2600-2650 GB/s"));
}

}  // namespace
}  // namespace dtrain
