// TraceRecord, the scanner the merge rewrites records with: it must accept exactly what a JSON
// parser accepts (nlohmann::json is the reference here), find each top-level field's text, and
// the merge must carry fields it does not know through unchanged.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/trace_record.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

using nlohmann::json;

TEST(TraceRecord, FindsEachTopLevelFieldsText) {
  TraceRecord r;
  const std::string text =
      R"( {"ph": "B", "name": "ALL\"RE\u0044UCE", "ts": 12.75, "pid":3,)"
      R"("args": {"bytes": 1048576, "ts": 9, "shape": [1, {"x": "}"}]}, "n": null} )";
  ASSERT_EQ(r.Parse(text), "");
  ASSERT_EQ(r.fields().size(), 6u);
  EXPECT_EQ(r.fields()[0].key, "ph");
  EXPECT_EQ(r.Find("ts"), "12.75");
  EXPECT_EQ(r.Find("args"), R"({"bytes": 1048576, "ts": 9, "shape": [1, {"x": "}"}]})");
  EXPECT_EQ(r.Find("n"), "null");
  EXPECT_EQ(r.Find("missing"), "");
  EXPECT_EQ(r.String("name"), "ALL\"REDUCE");
  EXPECT_EQ(r.String("pid", "none"), "none");  // not a string
  EXPECT_EQ(r.Int("ts", -1), 12);
  EXPECT_EQ(r.Int("pid", -1), 3);
  EXPECT_EQ(r.Int("name", -1), -1);
  EXPECT_EQ(EncodeJsonString("a\"b\n"), json("a\"b\n").dump());
  EXPECT_EQ(EncodeJsonString("plain"), "\"plain\"");
}

TEST(TraceRecord, AcceptsExactlyWhatAJsonParserAccepts) {
  const std::vector<std::string> texts = {
      R"({})",
      R"({"a": [1, -2, 3.5e+2, 0, -0.0, true, false, null, "x", {}]})",
      R"({"a": "\u00e9\ud83d\ude00 é 😀"})",
      R"({"a": 1,})",
      R"({"a" 1})",
      R"({"a": 01})",
      R"({"a": 1.})",
      R"({"a": .5})",
      R"({"a": tru})",
      R"({"a": "bad \x escape"})",
      R"({"a": "tab	inside"})",
      "{\"a\": \"\xC3\x28\"}",      // invalid UTF-8
      "{\"a\": \"\xED\xA0\x80\"}",  // an encoded surrogate
      "{\"a\": \"\xE0\x80\xAF\"}",  // an overlong form
      R"({"a": [1, 2})",
      R"({"a": 1} x)",
      R"([1])",
      R"({"a": "unterminated})",
  };
  for (const std::string& text : texts) {
    TraceRecord r;
    const bool scanner_ok = r.Parse(text).empty();
    const bool parser_ok = json::accept(text) && json::parse(text).is_object();  // records only
    EXPECT_EQ(scanner_ok, parser_ok) << text;
  }
}

TEST(TraceRecord, MergeKeepsUnknownFieldsAndRewritesClockAndIds) {
  testing::ScratchDir dir;
  testing::WriteFile(
      dir / "rank-1.json",
      "[{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"rank 1\", "
      "\"start_time_since_epoch_in_micros\": 1000, \"rank\": 1}},\n"
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"args\": {\"name\": "
      "\"t\\u00e9\"}},\n"
      "{\"ph\": \"B\", \"name\": \"A\\\"B\", \"cat\": \"x\", \"ts\": 5, \"pid\": 2, \"tid\": 7, "
      "\"args\": {\"k\": [1, {\"v\": \"}\"}]}},\n"
      "{\"ph\": \"E\", \"ts\": 9.6, \"pid\": 2},\n"
      "{\"ph\": \"X\", \"name\": \"op\", \"ts\": 10, \"dur\": 4, \"pid\": 2, \"id2\": {\"a\": "
      "1}},\n"
      "{\"ph\": \"i\", \"name\": \"CYCLE_START\", \"ts\": 11, \"s\": \"g\"}]");
  std::vector<json> seen;
  MergeResult result = MergeTimelines({dir / "rank-1.json"}, dir / "m.json", {});
  json merged = json::parse(testing::ReadFile(dir / "m.json"));
  for (const json& r : merged) {
    if (r["ph"] != "M") seen.push_back(r);
  }
  ASSERT_EQ(seen.size(), 4u) << merged.dump(1);
  EXPECT_EQ(seen[0], json::parse(R"({"ph": "B", "name": "A\"B", "cat": "x", "ts": 5, "pid": 1,
                                     "tid": 2, "args": {"k": [1, {"v": "}"}]}})"));
  EXPECT_EQ(seen[1], json::parse(R"({"ph": "E", "name": "A\"B", "ts": 9, "pid": 1, "tid": 2})"));
  EXPECT_EQ(seen[2], json::parse(R"({"ph": "X", "name": "op", "ts": 10, "dur": 4, "pid": 1,
                                     "tid": 2, "id2": {"a": 1}})"));
  EXPECT_EQ(seen[3], json::parse(R"({"ph": "i", "name": "CYCLE_START", "ts": 11, "s": "p",
                                     "pid": 1, "tid": 0})"));
  EXPECT_EQ(result.events, 4u);
  bool named = false;
  for (const json& r : merged) {
    named = named || (r["name"] == "thread_name" && r["tid"] == 2 && r["args"]["name"] == "té");
  }
  EXPECT_TRUE(named) << merged.dump(1);
}

}  // namespace
}  // namespace dtrain
