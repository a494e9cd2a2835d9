// What a launch that a signal ended before any rank started leaves behind, checked the same way
// by each test that interrupts a step before the start (a wait, a health check, a sync).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"

namespace dtrain::test {

// dtrain said `dtrain: job JOB interrupted by SIGINT DURING before it started; no rank was
// started`; JOB_DIR/job.json says interrupted and there is no rank log.
inline void ExpectInterruptedBeforeStart(const testing::DtrainProcess& dtrain,
                                         const std::string& job_dir, const std::string& job,
                                         const std::string& during) {
  const std::string said = "dtrain: job " + job + " interrupted by SIGINT " + during +
                           " before it started; no rank was started";
  EXPECT_NE(dtrain.err().find(said), std::string::npos) << dtrain.err();
  EXPECT_NE(testing::ReadFile(job_dir + "/job.json").find("\"status\": \"interrupted\""),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(job_dir + "/rank-0.log"));
}

}  // namespace dtrain::test
