// Splits each rank's byte streams into lines and prefixes them with [node:rank] (and the local
// time before it, with horovodrun's --prefix-output-with-timestamp).
#include "launcher/console_echo.h"

#include <ctime>

namespace dtrain {

ConsoleEcho::ConsoleEcho(std::FILE* out, std::FILE* err, ConsoleChoice choice)
    : out_(out), err_(err), choice_(std::move(choice)) {}

bool ConsoleEcho::Shows(int rank, OutputStream stream) const {
  if (!choice_.ranks.empty() && choice_.ranks.count(rank) == 0) return false;
  auto place = ranks_.find(rank);
  const int local_rank = place == ranks_.end() ? -1 : place->second.local_rank;
  if (!choice_.local_ranks.empty() && choice_.local_ranks.count(local_rank) == 0) return false;
  auto own = choice_.local_streams.find(local_rank);
  const ConsoleStreams streams = own == choice_.local_streams.end() ? choice_.streams : own->second;
  const int bit = stream == OutputStream::kStdout ? 1 : 2;
  return (static_cast<int>(streams) & bit) != 0;
}

std::string HorovodrunTimestamp() {
  char when[64];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  return std::string(when, std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", &local));
}

void ConsoleEcho::EmitLine(int rank, OutputStream stream, std::string_view line) {
  auto place = ranks_.find(rank);
  // As horovodrun writes it: the time, then the rank.
  std::string text = choice_.timestamps ? HorovodrunTimestamp() : std::string();
  text += "[" + (place == ranks_.end() ? std::string("?") : place->second.host) + ":" +
          std::to_string(rank) + "] ";
  text.append(line);
  text.push_back('\n');
  std::FILE* to = stream == OutputStream::kStdout ? out_ : err_;
  std::fwrite(text.data(), 1, text.size(), to);
  std::fflush(to);
}

void ConsoleEcho::Output(int rank, OutputStream stream, std::string_view bytes) {
  if (Shows(rank, stream)) lines_.Add(rank, stream, bytes);
}

void ConsoleEcho::Finish(int rank) {
  lines_.Finish(rank);
}

}  // namespace dtrain
