// torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters: the ranks' lines that
// contain any of the given strings, copied to <job>/filtered_stdout.log (filtered_stderr.log)
// as torchrun copies them, each line after a "[<role><rank>]:" header. Where torchrun keeps one
// such file per node and attempt, of the local ranks it tees, dtrain keeps one per job, of every
// rank of every node (the global rank in the header), since all output reaches the launcher.
// A line the disk refuses (full, failing) is lost and counted, as a rank log's bytes are: the job
// goes on, stderr says when the loss starts and when lines are written again, and a line the disk
// cut stays a line of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/rank_lines.h"
#include "launcher/rank_output_copy.h"
#include "launcher/transport.h"
#include "runtime/formats/line_appender.h"

namespace dtrain {

// torchrun's comma_separated_list: "a,b" -> {a, b}; ",," is a comma inside a string; empty
// strings are kept as torchrun keeps them (an empty string matches every line).
std::vector<std::string> ParseFilterList(const std::string& list);

class FilteredOutput : public RankOutputCopy {
 public:
  // `stdout_filters` / `stderr_filters` empty: that stream is not copied (no file).
  FilteredOutput(const std::string& job_dir, std::string role,
                 std::vector<std::string> stdout_filters, std::vector<std::string> stderr_filters);
  ~FilteredOutput() override;
  FilteredOutput(const FilteredOutput&) = delete;
  FilteredOutput& operator=(const FilteredOutput&) = delete;

  void Output(int rank, OutputStream stream, std::string_view bytes) override;
  // The rank ended: its last line, if it had no newline, is judged now.
  void Finish(int rank) override;
  std::string PathOf(int /*rank*/, OutputStream stream) const override { return Of(stream).path; }
  // Lines picked for the stream's file that the disk refused so far.
  uint64_t lost_lines(OutputStream stream) const { return Of(stream).out.lost_lines(); }

 private:
  struct Copy {
    std::vector<std::string> filters;
    std::string path;
    clip::LineAppender out;  // not open: the stream is not copied
  };
  void Line(int rank, OutputStream stream, std::string_view line);
  Copy& Of(OutputStream stream) { return copies_[stream == OutputStream::kStdout ? 0 : 1]; }
  const Copy& Of(OutputStream stream) const {
    return copies_[stream == OutputStream::kStdout ? 0 : 1];
  }

  std::string role_;
  Copy copies_[2];  // stdout, stderr
  RankLines lines_{
      [this](int rank, OutputStream stream, std::string_view line) { Line(rank, stream, line); }};
};

// The copies torchrun's two options ask for (each as given, "" = not given); null when neither.
std::unique_ptr<FilteredOutput> FilteredOutputFor(const std::string& job_dir,
                                                  const std::string& role,
                                                  const std::string& stdout_filters,
                                                  const std::string& stderr_filters);

}  // namespace dtrain
