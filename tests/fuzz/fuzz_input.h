// What every fuzz target shares: the input as a file (most parsers read paths) in a private
// scratch folder, and the rule that only the parser's own documented errors may escape.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dtrain::fuzz {

// A folder of this process's own under /tmp, created once.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string path = "/tmp/dtrain-fuzz-" + std::to_string(::getpid());
    ::mkdir(path.c_str(), 0700);
    return path;
  }();
  return dir;
}

// Writes `size` bytes to <scratch>/<name> and returns its path.
inline std::string WriteInput(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace dtrain::fuzz
