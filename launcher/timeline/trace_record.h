// TraceRecord: one trace-event record (a JSON object) seen as its top-level fields, each the
// exact text of its key and value in the record. Parse() checks that the whole text is one valid
// JSON object but builds no tree, so the merge can rewrite `ts` and `pid` and copy every other
// field byte for byte: several times faster than parsing into nlohmann::json and dumping it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

class TraceRecord {
 public:
  // One top-level member: `key` is the text between the key's quotes (escapes left as written),
  // `value` the value's JSON text.
  struct Field {
    std::string_view key;
    std::string_view value;
  };

  // Views into `text`, which must outlive this record's use. Returns "" when `text` is one valid
  // JSON object, else what is wrong and at which byte.
  std::string Parse(std::string_view text);
  // Parse() for the `number`-th record of the file `path`: throws dtrain::Error naming both
  // when the text is not one valid JSON object.
  void ParseOrThrow(std::string_view text, const std::string& path, uint64_t number);

  const std::vector<Field>& fields() const { return fields_; }
  // The value text of `key`; empty when absent.
  std::string_view Find(std::string_view key) const;
  // The decoded string of `key`, or `fallback` when absent or not a string.
  std::string String(std::string_view key, const std::string& fallback = "") const;
  // The number of `key` (a fraction is cut off), or `fallback` when absent, not a number, or
  // not a trace integer (TraceIntegerOr).
  int64_t Int(std::string_view key, int64_t fallback) const;
  // The number of `key` with its fraction (PyTorch traces write ns-precise µs), or `fallback`.
  double Number(std::string_view key, double fallback) const;

 private:
  std::vector<Field> fields_;
};

// The largest magnitude a trace integer (µs since the epoch, a duration, an id) may have: 2^53,
// about 285 years of microseconds, exact in a double. Sums of a few such values cannot overflow
// int64_t, and a float outside int64_t's range (converting it is undefined) is refused.
constexpr int64_t kMaxTraceInteger = int64_t{1} << 53;
// `value` with its fraction cut off, or `fallback` when it is not within ±kMaxTraceInteger (NaN
// included).
int64_t TraceIntegerOr(double value, int64_t fallback);

// The decoded content of a JSON string's text ("\"a\\nb\"" -> "a\nb").
std::string DecodeJsonString(std::string_view text);
// The JSON string text of `value` ("a\nb" -> "\"a\\nb\"").
std::string EncodeJsonString(const std::string& value);

// Appends `ns` as µs with 3 decimals, exactly ("{:.3f}" of ns / 1000.0 without its rounding):
// a trace's ts and dur.
void AppendMicros(int64_t ns, std::string& out);

// Appends `"key":value` (`value` is JSON text, copied as is) to a record being written that
// starts with '{', with a comma before it unless it is the record's first field.
inline void AppendRecordField(std::string& record, std::string_view key, std::string_view value) {
  if (record.size() > 1) record += ',';
  record += '"';
  record += key;
  record += "\":";
  record += value;
}

}  // namespace dtrain
