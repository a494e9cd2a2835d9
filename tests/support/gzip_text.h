// Gzipped text files for tests: a .json.gz trace read whole, or written.
#pragma once

#include <zlib.h>

#include <array>
#include <string>

namespace dtrain::test {

// The uncompressed text of `path` (a file that is not gzipped is read as it is); "" when it
// cannot be opened.
inline std::string Gunzip(const std::string& path) {
  std::string text;
  gzFile in = gzopen(path.c_str(), "rb");
  if (!in) return text;
  std::array<char, 65536> buffer;
  int n;
  while ((n = gzread(in, buffer.data(), buffer.size())) > 0) text.append(buffer.data(), n);
  gzclose(in);
  return text;
}

// Writes `text` gzipped to `path`.
inline void Gzip(const std::string& path, const std::string& text) {
  gzFile out = gzopen(path.c_str(), "wb");
  gzwrite(out, text.data(), static_cast<unsigned>(text.size()));
  gzclose(out);
}

}  // namespace dtrain::test
