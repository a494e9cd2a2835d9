// horovodrun's --output-filename (horovodrun_output_files.h).
#include "launcher/horovodrun_output_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "launcher/console_echo.h"
#include "launcher/error.h"
#include "launcher/rank_lines.h"

namespace dtrain {

std::string HorovodrunOutputFiles::RankFolder(int rank, int world_size) {
  // horovodrun: int(math.log10(size - 1)) + 1 digits (it fails for one rank; dtrain gives 1).
  int digits = 1;
  for (int last = world_size - 1; last >= 10; last /= 10) ++digits;
  return fmt::format("rank.{:0{}}", rank, digits);
}

HorovodrunOutputFiles::HorovodrunOutputFiles(std::string dir, int world_size, bool timestamps)
    : dir_(std::move(dir)), world_size_(world_size), timestamps_(timestamps) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    throw Error(
        fmt::format("--output-filename {}: cannot make the folder: {}", dir_, ec.message()));
  }
}

HorovodrunOutputFiles::~HorovodrunOutputFiles() {
  for (auto& [key, stream] : streams_) {
    if (!stream.file) continue;
    if (!stream.partial.empty()) Write(key.first, key.second, stream, "");
    std::fclose(stream.file);
  }
}

std::string HorovodrunOutputFiles::PathOf(int rank, OutputStream stream) const {
  return fmt::format("{}/{}/{}", dir_, RankFolder(rank, world_size_),
                     stream == OutputStream::kStdout ? "stdout" : "stderr");
}

HorovodrunOutputFiles::Stream* HorovodrunOutputFiles::Open(int rank, OutputStream stream) {
  Stream& s = streams_[{rank, stream}];
  if (s.file) return &s;
  if (s.failed) return nullptr;
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/" + RankFolder(rank, world_size_), ec);
  const std::string path = PathOf(rank, stream);
  s.file = std::fopen(path.c_str(), "w");  // once per job: later attempts append
  if (!s.file) {
    // Said once; the job goes on, the rank's log has everything.
    s.failed = true;
    std::fprintf(stderr,
                 "dtrain: warning: --output-filename: cannot write %s: %s; rank %d's output is "
                 "still in its log\n",
                 path.c_str(), std::strerror(errno), rank);
    return nullptr;
  }
  return &s;
}

void HorovodrunOutputFiles::Write(int rank, OutputStream stream, Stream& to,
                                  std::string_view piece) {
  std::string text = timestamps_ ? HorovodrunTimestamp() : std::string();
  text += fmt::format("[{}]<{}>:", rank, stream == OutputStream::kStdout ? "stdout" : "stderr");
  text += to.partial;
  text.append(piece);
  to.partial.clear();
  std::fwrite(text.data(), 1, text.size(), to.file);
}

void HorovodrunOutputFiles::Output(int rank, OutputStream stream, std::string_view bytes) {
  Stream* open = Open(rank, stream);
  if (!open) return;
  Stream& to = *open;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n' && bytes[i] != '\r') continue;
    Write(rank, stream, to, bytes.substr(start, i + 1 - start));
    start = i + 1;
  }
  to.partial.append(bytes.substr(start));
  // A rank that never ends a line cannot grow it without bound (horovodrun's would).
  if (to.partial.size() > kMaxPartialLine) Write(rank, stream, to, "");
  std::fflush(to.file);  // once for what the rank wrote at once, not once a line
}

void HorovodrunOutputFiles::Finish(int rank) {
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    Stream* to = Open(rank, stream);
    if (to && !to->partial.empty()) {
      Write(rank, stream, *to, "");
      std::fflush(to->file);
    }
  }
}

}  // namespace dtrain
