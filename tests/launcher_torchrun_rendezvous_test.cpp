// torchrun's --rdzv-conf as dtrain reads it: join_timeout, how long a job short of nodes waits
// for one to return, and last_call_timeout, how long one below --nnodes MAX waits
// (launcher/node_return_wait.h).
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

TEST(TorchrunRendezvous, LastCallTimeoutIsReadFromRdzvConfAndIsZeroWithoutIt) {
  TorchrunRendezvous rdzv;
  EXPECT_EQ(LastCallTimeoutS(rdzv), 0) << "dtrain starts at once, where torchrun waits 30 s";
  rdzv.conf = "join_timeout=60,last_call_timeout=30";
  EXPECT_EQ(LastCallTimeoutS(rdzv), 30);
  EXPECT_EQ(JoinTimeoutS(rdzv), 60);
  rdzv.conf = "last_call_timeout=0";
  EXPECT_EQ(LastCallTimeoutS(rdzv), 0);
  for (const char* bad : {"last_call_timeout=-1", "last_call_timeout=", "last_call_timeout=30s"}) {
    rdzv.conf = bad;
    try {
      LastCallTimeoutS(rdzv);
      ADD_FAILURE() << bad << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
      EXPECT_THAT(e.what(), HasSubstr("--rdzv-conf last_call_timeout=")) << bad;
      EXPECT_THAT(e.what(), HasSubstr("expected seconds >= 0")) << bad;
    }
  }
}

}  // namespace
}  // namespace dtrain
