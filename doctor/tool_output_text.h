// Internal to the doctor: the one whitespace trim its parsers of tool output (nvidia-smi, the
// kernel log, version strings) share.
#pragma once

#include <cctype>
#include <string_view>

namespace dtrain {

// `s` without leading and trailing whitespace.
inline std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace dtrain
