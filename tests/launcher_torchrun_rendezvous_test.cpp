// torchrun's --rdzv-conf as dtrain reads it: join_timeout, how long a job short of nodes waits
// for one to return (launcher/node_return_wait.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/torchrun_rendezvous.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

TEST(TorchrunRendezvous, JoinTimeoutIsReadFromRdzvConfAsTorchrunReadsIt) {
  TorchrunRendezvous rdzv;
  EXPECT_EQ(JoinTimeoutS(rdzv), 600) << "torchrun's default";
  rdzv.conf = "join_timeout=30";
  EXPECT_EQ(JoinTimeoutS(rdzv), 30);
  rdzv.conf = "read_timeout=5,,join_timeout=2.5";
  EXPECT_EQ(JoinTimeoutS(rdzv), 2.5);
  for (const char* bad :
       {"join_timeout=soon", "join_timeout=0", "join_timeout=", "join_timeout", "=5"}) {
    rdzv.conf = bad;
    try {
      JoinTimeoutS(rdzv);
      ADD_FAILURE() << bad << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
      EXPECT_THAT(e.what(), HasSubstr("--rdzv-conf")) << bad;
    }
  }
}

}  // namespace
}  // namespace dtrain
