#include "launcher/ssh/idle_watch.h"

#include <algorithm>
#include <cmath>

#include "launcher/shell_quote.h"

namespace dtrain {

int IdleWatchSeconds(double node_timeout_s) {
  if (!(node_timeout_s > 0)) return 0;
  return std::max(1, static_cast<int>(std::ceil(node_timeout_s)));
}

std::string HeartbeatCommand(double node_timeout_s) {
  // `exec cat` keeps the shell's pid, which the watcher started before it watches.
  const std::string script = std::string(IdleWatchScript()) +
                             "(dtrain_idle_watch $$ \"$1\") >/dev/null 2>&1 </dev/null &\n"
                             "exec cat\n";
  return "exec /bin/sh -c " + ShellQuote(script) + " dtrain-heartbeat " +
         std::to_string(std::max(1, IdleWatchSeconds(node_timeout_s)));
}

}  // namespace dtrain
