#include "launcher/python_script_command.h"

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

PythonScriptCommand RunPythonScripts(const std::vector<std::string>& command,
                                     const std::string& python, bool module, bool no_python) {
  if (module && no_python) {
    throw UsageError("-m and --no-python cannot be used together (torchrun refuses them too)");
  }
  PythonScriptCommand out{command, ""};
  if (command.empty()) {
    if (module) throw UsageError("-m: name the module to run: dtrain launch -m pkg.train ARGS");
    return out;
  }
  if (no_python || !(module || EndsWith(command.front(), ".py"))) return out;
  const std::string program = python.empty() ? "python3" : python;
  out.command.insert(out.command.begin(), program);
  if (module) out.command.insert(out.command.begin() + 1, "-m");
  out.note = fmt::format("{} runs as `{} {}{}`, as torchrun runs {}{}", command.front(), program,
                         module ? "-m " : "", command.front(), module ? "a module" : "a script",
                         module ? "" : " (--no-python runs it as a program)");
  return out;
}

}  // namespace dtrain
