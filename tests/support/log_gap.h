// What a rank log that lost bytes must still hold: the rank's output whole but for one marked gap.
#pragma once

#include <cstdint>
#include <regex>
#include <string>

#include <gtest/gtest.h>

namespace dtrain::testing {

// What the rank wrote (`all`) is its log with the one gap mark in it ("--- dtrain: N byte(s) of
// this rank's output lost here: WHY ---") taken out, and exactly N bytes at the mark: what the
// disk took before the outage, then what it took after.
inline void ExpectOneGapAccountedFor(const std::string& log, const std::string& all) {
  static const std::regex mark(
      R"(--- dtrain: (\d+) byte\(s\) of this rank's output lost here: [^\n]* ---\n)");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(log, found, mark)) << log;
  const uint64_t lost = std::stoull(found[1].str());
  std::string before = found.prefix().str();
  const std::string after = found.suffix().str();
  EXPECT_EQ(after.find("--- dtrain:"), std::string::npos) << "one gap: " << log;
  EXPECT_GT(lost, 0u);
  // A log cut mid-line gets a newline before the mark; it is not the rank's.
  if (all.compare(0, before.size(), before) != 0 && !before.empty() && before.back() == '\n') {
    before.pop_back();
  }
  EXPECT_EQ(all.substr(0, before.size()), before) << log;
  ASSERT_EQ(before.size() + lost + after.size(), all.size()) << log;
  EXPECT_EQ(all.substr(all.size() - after.size()), after) << log;
}

}  // namespace dtrain::testing
