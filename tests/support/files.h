// Files for tests: read one whole, write one, and a fresh folder that goes with the test.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dtrain::testing {

// The whole file, byte for byte; "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Writes `text` to a kernel file (a cgroup's limit, its procs) and says whether the kernel took
// it: such a write fails at close, not at open.
inline bool WriteKernelFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

// A fresh directory under /tmp, removed with everything in it at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "dtrain-test") {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dtrain::testing
