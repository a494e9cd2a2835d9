#include "launcher/file_replace.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "launcher/error.h"

namespace dtrain {

void ReplaceFile(const std::string& path, std::string_view text, std::string_view what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      const int saved = errno;
      std::remove(tmp.c_str());
      throw Error(fmt::format("{}: cannot write {}: {}", tmp, what, std::strerror(saved)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot write {}: {}", path, what, std::strerror(saved)));
  }
}

}  // namespace dtrain
