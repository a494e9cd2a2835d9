#include "launcher/filtered_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {

std::vector<std::string> ParseFilterList(const std::string& list) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] != ',') {
      out.back() += list[i];
    } else if (i + 1 < list.size() && list[i + 1] == ',') {
      out.back() += ',';
      ++i;
    } else {
      out.emplace_back();
    }
  }
  return out;
}

std::unique_ptr<FilteredOutput> FilteredOutputFor(const std::string& job_dir,
                                                  const std::string& role,
                                                  const std::string& stdout_filters,
                                                  const std::string& stderr_filters) {
  if (stdout_filters.empty() && stderr_filters.empty()) return nullptr;
  auto list = [](const std::string& given) {
    return given.empty() ? std::vector<std::string>{} : ParseFilterList(given);
  };
  return std::make_unique<FilteredOutput>(job_dir, role, list(stdout_filters),
                                          list(stderr_filters));
}

FilteredOutput::FilteredOutput(const std::string& job_dir, std::string role,
                               std::vector<std::string> stdout_filters,
                               std::vector<std::string> stderr_filters)
    : role_(role.empty() ? "default" : std::move(role)) {
  const char* names[2] = {"filtered_stdout.log", "filtered_stderr.log"};
  std::vector<std::string>* filters[2] = {&stdout_filters, &stderr_filters};
  for (int i = 0; i < 2; ++i) {
    Copy& copy = copies_[i];
    copy.filters = std::move(*filters[i]);
    if (copy.filters.empty()) continue;
    copy.path = job_dir + "/" + names[i];
    const int fd = ::open(copy.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(copy.path + ": cannot open for writing: " + std::strerror(errno));
    copy.out = clip::LineAppender(fd);
  }
}

FilteredOutput::~FilteredOutput() {
  lines_.FinishAll();
}

void FilteredOutput::Output(int rank, OutputStream stream, std::string_view bytes) {
  if (Of(stream).out.is_open()) lines_.Add(rank, stream, bytes);
}

void FilteredOutput::Finish(int rank) {
  lines_.Finish(rank);
}

void FilteredOutput::Line(int rank, OutputStream stream, std::string_view line) {
  Copy& copy = Of(stream);
  for (const std::string& needle : copy.filters) {
    if (line.find(needle) == std::string_view::npos) continue;
    const clip::LineAppender::Result result =
        copy.out.Append(fmt::format("[{}{}]:{}", role_, rank, line));
    if (result.change == clip::LineAppender::Change::kTakenAgain) {
      std::fprintf(stderr, "dtrain: %s is written again; %llu line(s) lost\n", copy.path.c_str(),
                   static_cast<unsigned long long>(result.gap_lines));
      std::fflush(stderr);
    } else if (result.change == clip::LineAppender::Change::kRefused) {
      std::fprintf(stderr,
                   "dtrain: warning: %s: cannot write: %s; the job goes on, and the lines its "
                   "filters pick are lost from it until the disk takes them again (the rank logs "
                   "mark their own gaps)\n",
                   copy.path.c_str(), result.error.c_str());
      std::fflush(stderr);
    }
    return;
  }
}

}  // namespace dtrain
