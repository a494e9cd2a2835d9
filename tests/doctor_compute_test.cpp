// `dtrain doctor --compute`'s verdict on the lines `dtrain-clip check` prints (its format:
// "PASS  <name padded to 17> <detail>") and the marker the doctor's rank command adds: a device
// with a FAIL line, one that ran past the limit, one where the check could not run, and all
// passing.
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

}  // namespace
}  // namespace dtrain
