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
  for (Copy& copy : copies_) {
    for (const auto& [rank, line] : copy.partial) {
      if (copy.file && !line.empty()) Line(copy, rank, line);
    }
    if (copy.file) std::fclose(copy.file);
  }
}

void FilteredOutput::Output(int rank, OutputStream stream, std::string_view bytes) {
  Copy& copy = copies_[stream == OutputStream::kStdout ? 0 : 1];
  if (!copy.file) return;
  std::string& partial = copy.partial[rank];
  size_t at = 0;
  for (size_t nl; (nl = bytes.find('\n', at)) != std::string_view::npos; at = nl + 1) {
    if (partial.empty()) {
      Line(copy, rank, bytes.substr(at, nl - at));
    } else {
      partial.append(bytes.substr(at, nl - at));
      Line(copy, rank, partial);
      partial.clear();
    }
  }
  partial.append(bytes.substr(at));
}

void FilteredOutput::Finish(int rank) {
  for (Copy& copy : copies_) {
    auto it = copy.partial.find(rank);
    if (it == copy.partial.end()) continue;
    if (copy.file && !it->second.empty()) Line(copy, rank, it->second);
    copy.partial.erase(it);
  }
}

void FilteredOutput::Line(Copy& copy, int rank, std::string_view line) {
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
