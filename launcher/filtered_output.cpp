#include "launcher/filtered_output.h"

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
    copies_[i].filters = std::move(*filters[i]);
    if (copies_[i].filters.empty()) continue;
    const std::string path = job_dir + "/" + names[i];
    copies_[i].file = std::fopen(path.c_str(), "a");
    if (!copies_[i].file) throw Error(path + ": cannot open for writing");
  }
}

FilteredOutput::~FilteredOutput() {
  lines_.FinishAll();
  for (Copy& copy : copies_) {
    if (copy.file) std::fclose(copy.file);
  }
}

void FilteredOutput::Output(int rank, OutputStream stream, std::string_view bytes) {
  if (copies_[stream == OutputStream::kStdout ? 0 : 1].file) lines_.Add(rank, stream, bytes);
}

void FilteredOutput::Finish(int rank) {
  lines_.Finish(rank);
}

void FilteredOutput::Line(int rank, OutputStream stream, std::string_view line) {
  Copy& copy = copies_[stream == OutputStream::kStdout ? 0 : 1];
  for (const std::string& needle : copy.filters) {
    if (line.find(needle) != std::string_view::npos) {
      const std::string text = fmt::format("[{}{}]:{}\n", role_, rank, line);
      std::fwrite(text.data(), 1, text.size(), copy.file);
      std::fflush(copy.file);
      return;
    }
  }
}

}  // namespace dtrain
