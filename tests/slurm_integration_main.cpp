// The Slurm integration set (slurm_integration_transport_test.cpp,
// slurm_integration_launch_test.cpp) runs in one process, so the Slurm cluster
// (tests/support/slurm_cluster.h) starts and stops once.
#include <gtest/gtest.h>

#include "tests/support/slurm_cluster.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new dtrain::test::SlurmCluster);
  return RUN_ALL_TESTS();
}
