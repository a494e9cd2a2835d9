// A fish shell string literal, for the completion scripts dtrain and dtrain-clip write.
#pragma once

#include <string>

namespace dtrain::clip {

// `text` in fish's single quotes, where only \\ and \' are escapes.
inline std::string FishString(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace dtrain::clip
