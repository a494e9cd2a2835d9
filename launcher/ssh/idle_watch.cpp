#include "launcher/ssh/idle_watch.h"

#include <algorithm>
#include <cmath>

#include "launcher/shell_quote.h"

namespace dtrain {

std::string_view IdleWatchScript();  // templates/idle_watch.sh, embedded

const std::string& IdleWatchFunction() {
  static const std::string text = [] {
    std::string out;
    const std::string_view script = IdleWatchScript();
    size_t at = 0;
    while (at < script.size()) {
      size_t end = script.find('\n', at);
      if (end == std::string_view::npos) end = script.size();
      std::string_view line = script.substr(at, end - at);
      at = end + 1;
      line.remove_prefix(std::min(line.find_first_not_of(' '), line.size()));
      if (line.empty() || line.front() == '#') continue;
      out.append(line).push_back('\n');
    }
    return out;
  }();
  return text;
}

int IdleWatchSeconds(double node_timeout_s) {
  if (!(node_timeout_s > 0)) return 0;
  return std::max(1, static_cast<int>(std::ceil(node_timeout_s)));
}

std::string HeartbeatCommand(double node_timeout_s) {
  // `exec cat` keeps the shell's pid, which the watcher started before it watches.
  const std::string script = IdleWatchFunction() +
                             "(dtrain_idle_watch $$ \"$1\") >/dev/null 2>&1 </dev/null &\n"
                             "exec cat\n";
  return "exec /bin/sh -c " + ShellQuote(script) + " dtrain-heartbeat " +
         std::to_string(std::max(1, IdleWatchSeconds(node_timeout_s)));
}

}  // namespace dtrain
