// dtrain-clip's metrics file on a disk that fills up (root: a tmpfs of the test's own, filled by
// a file and freed again): the lines the disk refused are lost and counted, training would go on,
// every line the file holds is whole JSON but for at most one the disk cut, and stderr says when
// the loss starts and ends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/train/metrics_log.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/tmpfs_disk.h"

namespace dtrain::clip {
namespace {

TEST(ClipMetricsDisk, AFullDiskLosesMetricsLinesAndSaysHowMany) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount)";
  const std::string mount = testing::ScratchDirs::Make("metrics-disk") + "/disk";
  const testing::TmpfsDisk disk(mount, "256k");
  ASSERT_EQ(disk.error(), "");
  const std::string path = mount + "/metrics/rank-0.jsonl";
  const std::string padding(300, 'p');
  int step = 0;
  uint64_t lost = 0;
  ::testing::internal::CaptureStderr();
  {
    MetricsLog log;
    log.Open(path);
    const auto write = [&](int lines) {
      for (int i = 0; i < lines; ++i)
        log.Write(MetricsLine().Add("step", step++).Add("pad", padding));
    };
    write(5);
    disk.Fill();
    write(40);  // 12 KiB: more than the last page's room
    lost = log.lost_lines();
    EXPECT_GT(lost, 0u);
    std::filesystem::remove(mount + "/filler");
    write(5);
    EXPECT_EQ(log.lost_lines(), lost);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_NE(err.find(path + ": cannot write metrics: No space left on device; training goes on"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain-clip: metrics are written to " + path + " again; " +
                     std::to_string(lost) + " line(s) lost"),
            std::string::npos)
      << err;
  int whole = 0, cut = 0, last_step = -1;
  std::string line;
  while (std::getline(text, line)) {
    const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
    if (doc.is_object()) {
      ++whole;
      EXPECT_GT(doc["step"].get<int>(), last_step);
      last_step = doc["step"].get<int>();
    } else {
      ++cut;
    }
  }
  EXPECT_LE(cut, 1) << text.str();
  EXPECT_EQ(whole + static_cast<int>(lost), step);
  EXPECT_EQ(last_step, step - 1);  // the lines after the disk was freed are there
}

}  // namespace
}  // namespace dtrain::clip
