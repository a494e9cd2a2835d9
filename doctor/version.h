// Version: a dotted version number as a tool printed it ("535.54.03", "12.4", "2.21.5").
// Parse keeps the text for display and the numbers for comparison; the empty Version is "unknown".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

struct Version {
  std::vector<int> parts;  // numeric components, most significant first
  std::string text;        // as printed ("535.54.03"), or rebuilt from parts

  bool known() const { return !parts.empty(); }
  int Major() const { return parts.empty() ? -1 : parts[0]; }
  // "12.4" for 12.4.131; just the major when there is no minor.
  std::string MajorMinor() const;
  // The first `n` components joined by dots ("2.21" for n=2).
  std::string Prefix(size_t n) const;

  // The first dotted number in `text` ("release 12.4, V12.4.131" -> 12.4); nullopt if none.
  static std::optional<Version> Find(std::string_view text);
  // `text` must be exactly a dotted number (surrounding blanks allowed).
  static std::optional<Version> Parse(std::string_view text);
  static Version FromParts(std::vector<int> parts);
};

// <0, 0, >0 like strcmp; missing components count as 0 (12.4 == 12.4.0).
int CompareVersions(const Version& a, const Version& b);
// True when `actual` matches the pin `wanted` on every component the pin gives ("2.21" pins
// 2.21.x; "12.4.1" pins exactly).
bool MatchesPin(const Version& actual, const Version& wanted);

}  // namespace dtrain
