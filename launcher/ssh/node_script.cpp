#include "launcher/ssh/node_script.h"

#include <algorithm>

namespace dtrain {

std::string ScriptOnTheWire(std::string_view script) {
  std::string out;
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
}

}  // namespace dtrain
