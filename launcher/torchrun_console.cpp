#include "launcher/torchrun_console.h"

#include <set>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

// torchrun's Std.from_str: one digit 0-3 for every local rank, else LOCAL_RANK:DIGIT pairs
// (local ranks not named: 0).
struct StreamChoice {
  int all = 0;
  std::map<int, int> by_local_rank;
};

int Digit(const std::string& option, const std::string& value, const std::string& text) {
  if (text.size() != 1 || text[0] < '0' || text[0] > '3') {
    throw UsageError(fmt::format(
        "{} {}: expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), for every local rank, "
        "or LOCAL_RANK:N pairs such as 0:1,1:2, as torchrun takes it",
        option, value));
  }
  return text[0] - '0';
}

StreamChoice ParseStreams(const std::string& option, const std::string& value) {
  StreamChoice out;
  if (value.empty()) return out;
  if (value.find(':') == std::string::npos) {
    out.all = Digit(option, value, value);
    return out;
  }
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string pair = value.substr(start, comma - start);
    const size_t colon = pair.find(':');
    const std::string rank = pair.substr(0, colon);
    if (colon == std::string::npos || rank.empty() ||
        rank.find_first_not_of("0123456789") != std::string::npos || rank.size() > 6) {
      Digit(option, value, "");  // throws, with the forms torchrun takes
    }
    out.by_local_rank[std::stoi(rank)] = Digit(option, value, pair.substr(colon + 1));
    start = comma + 1;
  }
  return out;
}

}  // namespace

ConsoleStreamsByLocalRank TorchrunConsole(const std::string& redirects, const std::string& tee) {
  const StreamChoice redirected = ParseStreams("--redirects", redirects);
  const StreamChoice teed = ParseStreams("--tee", tee);
  // A map names its local ranks; one digit speaks for all of them.
  auto of = [](const StreamChoice& c, int local_rank) {
    if (c.by_local_rank.empty()) return c.all;
    auto it = c.by_local_rank.find(local_rank);
    return it == c.by_local_rank.end() ? 0 : it->second;
  };
  auto shown = [](int redirect, int tee) {
    return static_cast<ConsoleStreams>((3 & ~redirect) | tee);
  };
  ConsoleStreamsByLocalRank out;
  out.others = shown(redirected.by_local_rank.empty() ? redirected.all : 0,
                     teed.by_local_rank.empty() ? teed.all : 0);
  std::set<int> named;
  for (const auto& [local_rank, streams] : redirected.by_local_rank) named.insert(local_rank);
  for (const auto& [local_rank, streams] : teed.by_local_rank) named.insert(local_rank);
  for (int local_rank : named)
    out.by_local_rank[local_rank] = shown(of(redirected, local_rank), of(teed, local_rank));
  return out;
}

}  // namespace dtrain
