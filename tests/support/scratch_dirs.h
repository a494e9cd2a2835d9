// Scratch folders for tests whose files outlive one function (rank outputs, job folders): made
// under /tmp, all removed when the test program ends with every test passed. After a failure
// they are kept, and their paths printed, so the logs and checkpoints can be looked at.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace dtrain::testing {

class ScratchDirs : public ::testing::Environment {
 public:
  static std::string Make(const std::string& prefix) {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    std::string path = ::mkdtemp(pattern.data());
    Paths().push_back(path);
    return path;
  }
  void TearDown() override {
    bool passed = ::testing::UnitTest::GetInstance()->Passed();
    for (const std::string& path : Paths()) {
      std::error_code ec;
      if (passed) {
        std::filesystem::remove_all(path, ec);
      } else {
        std::fprintf(stderr, "kept for inspection: %s\n", path.c_str());
      }
    }
  }

 private:
  static std::vector<std::string>& Paths() {
    static std::vector<std::string> paths;
    return paths;
  }
};

// Registered once per test program, before main() runs the tests.
inline ::testing::Environment* const kScratchDirsCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchDirs);

}  // namespace dtrain::testing
