// Dotted version numbers: finding them in tool output, comparing them, matching pins.
#include "doctor/version.h"

#include <cctype>

namespace dtrain {
namespace {

bool IsDigit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Reads "N(.N)*" starting at text[pos]; pos must be at a digit. Advances pos past it.
Version ReadDotted(std::string_view text, size_t& pos) {
  Version v;
  size_t start = pos;
  while (pos < text.size() && IsDigit(text[pos])) {
    int value = 0;
    while (pos < text.size() && IsDigit(text[pos])) {
      if (value < 100000000) value = value * 10 + (text[pos] - '0');
      ++pos;
    }
    v.parts.push_back(value);
    if (pos + 1 < text.size() && text[pos] == '.' && IsDigit(text[pos + 1])) {
      ++pos;
    } else {
      break;
    }
  }
  v.text = std::string(text.substr(start, pos - start));
  return v;
}

}  // namespace

std::string Version::Prefix(size_t n) const {
  std::string out;
  for (size_t i = 0; i < parts.size() && i < n; ++i) {
    if (i) out += '.';
    out += std::to_string(parts[i]);
  }
  return out;
}

std::string Version::MajorMinor() const {
  return Prefix(2);
}

std::optional<Version> Version::Find(std::string_view text) {
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!IsDigit(text[pos])) continue;
    // A number glued to a word ("V12", "cu121", "x86_64") is not a version on its own.
    if (pos > 0 &&
        (std::isalpha(static_cast<unsigned char>(text[pos - 1])) || text[pos - 1] == '_')) {
      while (pos < text.size() && (IsDigit(text[pos]) || text[pos] == '.' || text[pos] == '_')) {
        ++pos;
      }
      continue;
    }
    return ReadDotted(text, pos);
  }
  return std::nullopt;
}

std::optional<Version> Version::Parse(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  text = text.substr(begin, end - begin);
  if (text.empty() || !IsDigit(text[0])) return std::nullopt;
  size_t pos = 0;
  Version v = ReadDotted(text, pos);
  if (pos != text.size()) return std::nullopt;
  return v;
}

Version Version::FromParts(std::vector<int> parts) {
  Version v;
  v.parts = std::move(parts);
  v.text = v.Prefix(v.parts.size());
  return v;
}

int CompareVersions(const Version& a, const Version& b) {
  size_t n = std::max(a.parts.size(), b.parts.size());
  for (size_t i = 0; i < n; ++i) {
    int x = i < a.parts.size() ? a.parts[i] : 0;
    int y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

bool MatchesPin(const Version& actual, const Version& wanted) {
  if (!actual.known() || !wanted.known()) return false;
  for (size_t i = 0; i < wanted.parts.size(); ++i) {
    if (i >= actual.parts.size() || actual.parts[i] != wanted.parts[i]) return false;
  }
  return true;
}

}  // namespace dtrain
