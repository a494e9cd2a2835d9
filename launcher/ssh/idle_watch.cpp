#include "launcher/ssh/idle_watch.h"

#include <algorithm>
#include <cmath>

#include "launcher/shell_quote.h"
#include "launcher/ssh/node_script.h"

namespace dtrain {

std::string_view IdleWatchScript();  // templates/idle_watch.sh, embedded

const std::string& IdleWatchFunction() {
  static const std::string text = ScriptOnTheWire(IdleWatchScript());
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
