#include "runtime/formats/line_appender.h"

#include <unistd.h>

#include <utility>

#include "runtime/formats/file_sync.h"

namespace dtrain::clip {

LineAppender::~LineAppender() {
  if (fd_ >= 0) ::close(fd_);
}

LineAppender::LineAppender(LineAppender&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      refusing_(other.refusing_),
      cut_(other.cut_),
      gap_lines_(other.gap_lines_),
      lost_lines_(other.lost_lines_) {}

LineAppender& LineAppender::operator=(LineAppender&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    refusing_ = other.refusing_;
    cut_ = other.cut_;
    gap_lines_ = other.gap_lines_;
    lost_lines_ = other.lost_lines_;
  }
  return *this;
}

LineAppender::Result LineAppender::Append(std::string_view line) {
  Result result;
  // After a cut line, a newline first: this one starts a line of its own.
  std::string text;
  text.reserve(line.size() + 2);
  if (cut_) text += '\n';
  text += line;
  text += '\n';
  const size_t written = WriteWhatTheDiskTakes(fd_, text, result.error);
  if (written == text.size()) {
    cut_ = false;
    if (refusing_) {
      result.change = Change::kTakenAgain;
      result.gap_lines = gap_lines_;
      refusing_ = false;
      gap_lines_ = 0;
    }
    return result;
  }
  cut_ = cut_ || written > 0;
  ++gap_lines_;
  ++lost_lines_;
  if (!refusing_) result.change = Change::kRefused;
  refusing_ = true;
  return result;
}

}  // namespace dtrain::clip
