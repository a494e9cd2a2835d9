#include "launcher/timeline/merged_trace_file.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {

MergedTraceFile::MergedTraceFile(const std::string& path) : path_(path), temp_(path + ".partial") {
  file_ = std::fopen(temp_.c_str(), "wb");
  if (!file_) throw Error(fmt::format("{}: cannot write ({})", temp_, std::strerror(errno)));
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  std::fputs("[\n", file_);
}

MergedTraceFile::~MergedTraceFile() {
  if (file_) {
    std::fclose(file_);
    std::remove(temp_.c_str());
  }
}

void MergedTraceFile::WriteText(std::string_view text) {
  if (!first_) std::fwrite(",\n", 1, 2, file_);
  first_ = false;
  std::fwrite(text.data(), 1, text.size(), file_);
}

void MergedTraceFile::Commit() {
  std::fputs("\n]\n", file_);
  bool ok = std::ferror(file_) == 0;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok || std::rename(temp_.c_str(), path_.c_str()) != 0) {
    std::remove(temp_.c_str());
    throw Error(fmt::format("{}: cannot write ({})", path_, std::strerror(errno)));
  }
}

}  // namespace dtrain
