// The cluster file's own health checks (health_checks:): each key read, and broken entries that
// give FILE:LINE:COL errors naming the expectation.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/cluster_spec.h"
#include "tests/support/cluster_text.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  return testing::ClusterTextError(text);
}

// health_checks: a list of {name, run, timeout, severity, fix}; names unique, a command needed,
// timeouts within 1..kMaxHealthCheckSeconds.
TEST(ClusterSpec, HealthChecks) {
  const ClusterSpec spec = ParseClusterText(
      "nodes: [{host: a}]\nhealth_checks:\n"
      "  - {name: scratch, run: 'mountpoint -q /scratch', timeout: 5, fix: mount /scratch}\n"
      "  - name: bios\n    run: |\n      grep -q 2.1 /sys/class/dmi/id/bios_version\n"
      "    severity: warning\n",
      "x");
  ASSERT_EQ(spec.health_checks.size(), 2u);
  EXPECT_EQ(spec.health_checks[0].name, "scratch");
  EXPECT_EQ(spec.health_checks[0].run, "mountpoint -q /scratch");
  EXPECT_EQ(spec.health_checks[0].timeout_s, 5);
  EXPECT_FALSE(spec.health_checks[0].warning);
  EXPECT_EQ(spec.health_checks[0].fix, "mount /scratch");
  EXPECT_EQ(spec.health_checks[1].run, "grep -q 2.1 /sys/class/dmi/id/bios_version\n");
  EXPECT_EQ(spec.health_checks[1].timeout_s, 10) << "the default";
  EXPECT_TRUE(spec.health_checks[1].warning);
  EXPECT_TRUE(ParseClusterText("nodes: [{host: a}]\n", "x").health_checks.empty());
  const std::string head = "nodes: [{host: a}]\nhealth_checks:\n";
  EXPECT_THAT(ErrorOf(head + "  - {name: x, run: true}\n  - {name: x, run: false}\n"),
              HasSubstr("c.yaml:4:12: health_checks[1].name: 'x' is already the name of another "
                        "check"));
  EXPECT_THAT(
      ErrorOf(head + "  - {name: x}\n"),
      HasSubstr("c.yaml:3:5: health_checks[0]: missing 'run' (the command, run with sh -c)"));
  EXPECT_THAT(ErrorOf(head + "  - {run: true}\n"), HasSubstr("health_checks[0]: missing 'name'"));
  EXPECT_THAT(ErrorOf(head + "  - {name: x, run: '  '}\n"),
              HasSubstr("health_checks[0].run: expected a command"));
  EXPECT_THAT(ErrorOf(head + "  - {name: 'a b', run: true}\n"),
              HasSubstr("health_checks[0].name: byte 0x20"));
  EXPECT_THAT(ErrorOf(head + "  - {name: x, run: true, timeout: 0}\n"),
              HasSubstr("health_checks[0].timeout (seconds): expected an integer from 1 to 300, "
                        "got 0"));
  EXPECT_THAT(ErrorOf(head + "  - {name: x, run: true, severity: fatal}\n"),
              HasSubstr("health_checks[0].severity: expected error or warning, got 'fatal'"));
  EXPECT_THAT(ErrorOf(head + "  - {name: x, run: true, every: 5}\n"),
              HasSubstr("unknown key 'every' in health_checks[0]"));
  EXPECT_THAT(ErrorOf(head + "  run: true\n"), HasSubstr("health_checks: expected a list of"));
}

}  // namespace
}  // namespace dtrain
