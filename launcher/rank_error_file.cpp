// The format is torch's ErrorHandler.record_exception; a newer torch that writes "message" as a
// plain string is read too (no traceback then).
#include "launcher/rank_error_file.h"

#include <cctype>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/open_to_read.h"

namespace dtrain {

std::string InnermostFrame(const std::string& callstack) {
  const std::string file_tag = "File \"";
  const size_t at = callstack.rfind(file_tag);
  if (at == std::string::npos) return "";
  const size_t name_start = at + file_tag.size();
  const size_t name_end = callstack.find('"', name_start);
  const std::string line_tag = ", line ";
  if (name_end == std::string::npos || callstack.compare(name_end + 1, line_tag.size(), line_tag))
    return "";
  const size_t digits = name_end + 1 + line_tag.size();
  size_t end = digits;
  while (end < callstack.size() && std::isdigit(static_cast<unsigned char>(callstack[end]))) ++end;
  if (end == digits) return "";
  return callstack.substr(name_start, name_end - name_start) + ":" +
         callstack.substr(digits, end - digits);
}

std::optional<RankError> ReadRankErrorFile(const std::string& path, int rank) {
  const std::optional<std::string> text = ReadToEnd(path);
  if (!text) return std::nullopt;
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (!doc.is_object() || !doc.contains("message")) return std::nullopt;
  RankError error;
  error.rank = rank;
  error.path = path;
  const nlohmann::json& message = doc["message"];
  if (message.is_string()) {
    error.message = message.get<std::string>();
    return error;
  }
  if (!message.is_object() || !message.contains("message") || !message["message"].is_string())
    return std::nullopt;
  error.message = message["message"].get<std::string>();
  const nlohmann::json extra = message.value("extraInfo", nlohmann::json::object());
  if (extra.is_object()) {
    if (extra.contains("py_callstack") && extra["py_callstack"].is_string())
      error.callstack = extra["py_callstack"].get<std::string>();
    if (extra.contains("timestamp") && extra["timestamp"].is_string())
      error.time_s = std::atoll(extra["timestamp"].get<std::string>().c_str());
  }
  error.where = InnermostFrame(error.callstack);
  return error;
}

std::string RankErrorLine(const RankError& error, const std::string& host) {
  std::string line = fmt::format("rank {} on node {}: {}", error.rank, host, error.message);
  if (!error.where.empty()) line += " (" + error.where + ")";
  return line.substr(0, line.find('\n'));
}

std::string DescribeRankError(const RankError& error, const std::string& host) {
  std::string when;
  if (error.time_s > 0) {
    const time_t t = static_cast<time_t>(error.time_s);
    std::tm tm{};
    char buf[32];
    ::gmtime_r(&t, &tm);
    std::strftime(buf, sizeof(buf), " at %Y-%m-%d %H:%M:%S UTC", &tm);
    when = buf;
  }
  std::string text = fmt::format("dtrain: root cause: rank {} on node {}{}: {}\n", error.rank, host,
                                 when, error.message);
  if (!error.where.empty()) {
    text += fmt::format("dtrain:   at {} (traceback in {})\n", error.where, error.path);
  }
  return text;
}

std::optional<RankError> FirstRankError(const std::vector<std::pair<int, std::string>>& ranks,
                                        int failed_rank) {
  std::optional<RankError> first;
  for (const auto& [rank, path] : ranks) {
    std::optional<RankError> error = ReadRankErrorFile(path, rank);
    if (!error) continue;
    const bool earlier = !first || error->time_s < first->time_s ||
                         (error->time_s == first->time_s && rank == failed_rank);
    if (earlier) first = std::move(error);
  }
  return first;
}

}  // namespace dtrain
