// LineAppender: lines appended to a file, each in one write(2), on a disk that may refuse them
// (full, failing). A line the disk refuses is lost and counted, and the writer goes on; a line
// the disk took only part of stays a line of its own (the next one starts with a newline). What
// changed is returned, for the caller to say in its own words: the first refusal of an outage,
// and the first line taken again after one, with how many the outage lost. Used by dtrain-clip's
// metrics (runtime/train/metrics_log.h) and torchrun's filtered copies
// (launcher/filtered_output.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtrain::clip {

class LineAppender {
 public:
  enum class Change {
    kNone,        // taken, as the one before; or refused, as the one before
    kRefused,     // the first line an outage refused: `error` says why
    kTakenAgain,  // the first line taken after an outage: `gap_lines` it lost
  };
  struct Result {
    Change change = Change::kNone;
    std::string error;       // kRefused: strerror ("No space left on device")
    uint64_t gap_lines = 0;  // kTakenAgain: the lines lost since the disk last took one
  };

  LineAppender() = default;
  explicit LineAppender(int fd) : fd_(fd) {}  // takes the descriptor: closed with this
  ~LineAppender();
  LineAppender(LineAppender&& other) noexcept;
  LineAppender& operator=(LineAppender&& other) noexcept;
  LineAppender(const LineAppender&) = delete;
  LineAppender& operator=(const LineAppender&) = delete;

  bool is_open() const { return fd_ >= 0; }
  // `line` without its newline.
  Result Append(std::string_view line);
  uint64_t lost_lines() const { return lost_lines_; }  // refused, in all

 private:
  int fd_ = -1;
  bool refusing_ = false;   // the last line was refused
  bool cut_ = false;        // the file ends in a line the disk took only part of
  uint64_t gap_lines_ = 0;  // lost since the disk last took one
  uint64_t lost_lines_ = 0;
};

}  // namespace dtrain::clip
