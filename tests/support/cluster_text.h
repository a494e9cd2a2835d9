// Cluster-file text in tests: the error a text gets from the parser.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"

namespace dtrain::testing {

// The error text for `text` (named c.yaml), or "" if it parsed. Every failure must be a
// dtrain::Error with the usage exit status.
inline std::string ClusterTextError(const std::string& text) {
  try {
    ParseClusterText(text, "c.yaml");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
    return e.what();
  }
  return "";
}

}  // namespace dtrain::testing
