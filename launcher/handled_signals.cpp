#include "launcher/handled_signals.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

// The signals a launcher may trap and hand on: those whose default action ends a process,
// SIGKILL and SIGSTOP aside (they cannot be caught), SIGPIPE aside (dtrain ignores it), and the
// ones a fault raises (SIGSEGV, SIGBUS, SIGFPE, SIGILL) aside.
const std::vector<std::pair<const char*, int>>& Handleable() {
  static const std::vector<std::pair<const char*, int>> table = {
      {"SIGTERM", SIGTERM},     {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
      {"SIGUSR1", SIGUSR1},     {"SIGUSR2", SIGUSR2}, {"SIGALRM", SIGALRM}, {"SIGXCPU", SIGXCPU},
      {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF}, {"SIGPWR", SIGPWR}};
  return table;
}

}  // namespace

std::vector<int> ParseHandledSignals(const std::string& list) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    std::string word = list.substr(at, comma - at);
    at = comma + 1;
    word.erase(0, word.find_first_not_of(" \t"));
    word.erase(word.find_last_not_of(" \t") + 1);
    if (word.empty()) continue;
    const auto& table = Handleable();
    auto it = std::find_if(table.begin(), table.end(),
                           [&](const auto& entry) { return word == entry.first; });
    if (it == table.end()) {
      std::string names;
      for (const auto& entry : table)
        names += (names.empty() ? "" : ", ") + std::string(entry.first);
      throw UsageError(fmt::format(
          "--signals-to-handle: '{}' is not a signal dtrain can stop a job on; expected names "
          "from {}, separated by commas",
          word, names));
    }
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  return out;
}

int ClosingSignal(int received) {
  return received == SIGINT || received == SIGTERM || received == SIGHUP || received == SIGQUIT
             ? SIGTERM
             : received;
}

}  // namespace dtrain
