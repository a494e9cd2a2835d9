// Splits each rank's byte stream into lines and prefixes them with [node:rank].
#include "launcher/console_echo.h"

namespace dtrain {

namespace {
constexpr size_t kMaxPartial = 64 * 1024;  // a longer unterminated line is shown in pieces
}  // namespace

ConsoleEcho::ConsoleEcho(std::FILE* out, std::map<int, std::string> hosts, std::set<int> ranks,
                         bool quiet)
    : out_(out), hosts_(std::move(hosts)), ranks_(std::move(ranks)), quiet_(quiet) {}

bool ConsoleEcho::Shows(int rank) const {
  return !quiet_ && (ranks_.empty() || ranks_.count(rank) > 0);
}

void ConsoleEcho::EmitLine(int rank, std::string_view line) {
  auto host = hosts_.find(rank);
  std::string text = "[" + (host == hosts_.end() ? std::string("?") : host->second) + ":" +
                     std::to_string(rank) + "] ";
  text.append(line);
  text.push_back('\n');
  std::fwrite(text.data(), 1, text.size(), out_);
}

void ConsoleEcho::Output(int rank, std::string_view bytes) {
  if (!Shows(rank)) return;
  std::string& partial = partial_[rank];
  size_t start = 0;
  for (size_t nl = bytes.find('\n'); nl != std::string_view::npos; nl = bytes.find('\n', start)) {
    if (partial.empty()) {
      EmitLine(rank, bytes.substr(start, nl - start));
    } else {
      partial.append(bytes.substr(start, nl - start));
      EmitLine(rank, partial);
      partial.clear();
    }
    start = nl + 1;
  }
  partial.append(bytes.substr(start));
  if (partial.size() > kMaxPartial) {
    EmitLine(rank, partial);
    partial.clear();
  }
  std::fflush(out_);
}

void ConsoleEcho::Finish(int rank) {
  auto it = partial_.find(rank);
  if (it == partial_.end() || it->second.empty()) return;
  EmitLine(rank, it->second);
  it->second.clear();
  std::fflush(out_);
}

}  // namespace dtrain
