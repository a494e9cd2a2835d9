// Kineto records are rewritten as text like dtrain-clip's (trace_record.h): ts, pid, tid (and a
// flow's id) replaced, every other field copied as written. Kineto's own metadata records are
// dropped: the merge names the rank's process and its tracks itself.
#include "launcher/timeline/kineto_rank_merge.h"

#include <charconv>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/timeline/trace_record.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain {
namespace {

// Tracks of a PyTorch trace are numbered from here in the rank's process, past the few
// tracks a dtrain-clip trace of the same rank has.
constexpr int kFirstKinetoTid = 100000;
// The start placed before the first record's ts: Kineto does not write its events in time order.
constexpr int64_t kStartMarginUs = 1000000;

// A Kineto time (µs with up to 3 decimals, "4564792043213.035") in integer ns, exactly; other
// number forms through strtod. Not a number: 0.
int64_t Nanos(std::string_view text) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  int64_t whole = 0;
  const size_t digits_from = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - digits_from < 16) {
    whole = whole * 10 + (text[i++] - '0');
  }
  int64_t fraction = 0;
  int fraction_digits = 0;
  if (i > digits_from && i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && fraction_digits < 4) {
      fraction = fraction * 10 + (text[i++] - '0');
      ++fraction_digits;
    }
  }
  if (i > digits_from && i == text.size() && fraction_digits <= 3) {
    for (int d = fraction_digits; d < 3; ++d) fraction *= 10;
    const int64_t ns = whole * 1000 + fraction;
    return negative ? -ns : ns;
  }
  TraceRecord one;  // exponents, more decimals, very long numbers
  std::string record = "{\"v\":" + std::string(text) + "}";
  if (!one.Parse(record).empty()) return 0;
  return std::llround(one.Number("v", 0) * 1000.0);
}

void AppendInt(int64_t value, std::string& out) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  out.append(buffer, end);
}

bool IsGpuTrackCategory(std::string_view cat) {
  return IsGpuActivityCategory(cat) || cat == "gpu_user_annotation";
}

class KinetoRankMerger {
 public:
  KinetoRankMerger(RankTraceInfo& info, MergedTraceFile& out, const KinetoEventObserver& observer)
      : info_(info), out_(out), observer_(observer) {}

  void Run() {
    TraceReader reader(info_.path);
    std::string_view text;
    while (reader.NextView(text)) Take(reader, text);
    if (reader.truncated()) {
      throw Error(
          fmt::format("{} (a PyTorch profiler trace is written whole: this file is "
                      "damaged; export it again)",
                      reader.truncation_note()));
    }
  }

 private:
  struct Track {
    int tid = 0;
    bool named = false;
  };

  void NameTrack(Track& track, std::string_view pid, std::string_view tid, std::string_view cat) {
    track.named = true;
    std::string pid_text = pid.size() && pid[0] == '"' ? DecodeJsonString(pid) : std::string(pid);
    std::string tid_text = tid.size() && tid[0] == '"' ? DecodeJsonString(tid) : std::string(tid);
    std::string name;
    int64_t sort = track.tid;
    if (IsGpuTrackCategory(cat)) {
      name = fmt::format("GPU {} stream {}", pid_text, tid_text);
      sort += 1000000;  // below the CPU threads
    } else if (pid.size() && pid[0] != '"') {
      name = fmt::format("CPU thread {}", tid_text);
    } else {
      name = tid_text.empty() ? pid_text : fmt::format("{} {}", pid_text, tid_text);
      sort += 2000000;
    }
    out_.Write({{"name", trace::kThreadName},
                {"ph", "M"},
                {"pid", info_.rank},
                {"tid", track.tid},
                {"args", {{"name", name}}}});
    out_.Write({{"name", "thread_sort_index"},
                {"ph", "M"},
                {"pid", info_.rank},
                {"tid", track.tid},
                {"args", {{"sort_index", sort}}}});
  }

  // The fields the merge reads or replaces, found in one pass (the last of a key wins, as in
  // nlohmann::json).
  struct Wanted {
    std::string_view ph, ts, pid, tid, cat, name, dur, args, s, id;
  };

  static void Pick(const TraceRecord::Field& field, Wanted& w) {
    using Member = std::string_view Wanted::*;
    static constexpr std::pair<std::string_view, Member> kKeys[] = {
        {"ph", &Wanted::ph},   {"ts", &Wanted::ts},     {"pid", &Wanted::pid},
        {"tid", &Wanted::tid}, {"cat", &Wanted::cat},   {"name", &Wanted::name},
        {"dur", &Wanted::dur}, {"args", &Wanted::args}, {"s", &Wanted::s},
        {"id", &Wanted::id}};
    for (const auto& [key, member] : kKeys) {
      if (field.key == key) {
        w.*member = field.value;
        return;
      }
    }
  }

  // A string field's content (decoded into `scratch` only when it has escapes); "" when it is
  // absent or not a string.
  static std::string_view Text(std::string_view value, std::string& scratch) {
    if (value.size() < 2 || value[0] != '"') return {};
    if (value.find('\\') == std::string_view::npos) return value.substr(1, value.size() - 2);
    scratch = DecodeJsonString(value);
    return scratch;
  }

  Track& TrackOf(std::string_view pid, std::string_view tid) {
    // Records come in runs of one thread: most look-ups are the last track again.
    if (last_track_ && pid == last_pid_ && tid == last_tid_) return *last_track_;
    key_.assign(pid);
    key_ += '/';
    key_.append(tid);
    auto [it, added] = tracks_.try_emplace(key_);
    if (added) it->second.tid = kFirstKinetoTid + static_cast<int>(tracks_.size()) - 1;
    last_pid_.assign(pid);
    last_tid_.assign(tid);
    last_track_ = &it->second;
    return it->second;
  }

  void Take(const TraceReader& reader, std::string_view text) {
    record_.ParseOrThrow(text, reader.path(), reader.records());
    Wanted w;
    for (const TraceRecord::Field& field : record_.fields()) Pick(field, w);
    const std::string_view phase = Text(w.ph, ph_scratch_);
    if (phase.empty() || phase == "M" || w.ts.empty()) return;
    Track& track = TrackOf(w.pid, w.tid);
    const std::string_view cat = Text(w.cat, cat_scratch_);
    const bool flow = phase == "s" || phase == "t" || phase == "f";
    if (!track.named && !flow) NameTrack(track, w.pid, w.tid, cat);
    const int64_t ts_ns = Nanos(w.ts) + info_.kineto_shift_ns;
    const bool global = phase == "i" && Text(w.s, s_scratch_) == "g";
    out_text_.assign(1, '{');
    for (const TraceRecord::Field& field : record_.fields()) {
      const std::string_view k = field.key;
      if (k.size() <= 3 &&
          (k == "ts" || k == "pid" || k == "tid" || (global && k == "s") || (flow && k == "id")))
        continue;
      AppendRecordField(out_text_, k, field.value);
    }
    if (global) AppendRecordField(out_text_, "s", "\"p\"");
    if (flow) {
      const int64_t id = record_.Int("id", 0);
      AppendRecordField(
          out_text_, "id",
          std::to_string(static_cast<int64_t>(info_.rank) * kKinetoFlowIdsPerRank + id));
    }
    AddKey("ts");
    AppendMicros(ts_ns, out_text_);
    AddKey("pid");
    AppendInt(info_.rank, out_text_);
    AddKey("tid");
    AppendInt(track.tid, out_text_);
    out_text_ += '}';
    out_.WriteText(out_text_);
    ++info_.events;
    if (observer_ && phase == "X") {
      Observe(w, cat, static_cast<double>(ts_ns) / 1000.0, track.tid);
    }
  }

  void Observe(const Wanted& w, std::string_view cat, double ts, int thread) {
    int64_t stream = -1;
    int64_t correlation = -1;
    int64_t bytes = -1;
    int64_t wait_on_stream = -1;
    int64_t wait_on_record = -1;
    double memory_bw_gbps = -1;
    // Stream synchronisation records sit on a GPU stream too (the summary bounds spans by them).
    const bool gpu = IsGpuActivityCategory(cat) || cat == "cuda_sync";
    if ((gpu || cat == "cuda_runtime" || cat == "cuda_driver") && !w.args.empty() &&
        args_.Parse(w.args).empty()) {
      if (gpu) stream = args_.Int("stream", -1);
      correlation = args_.Int("correlation", -1);
      if (cat == "gpu_memcpy") bytes = args_.Int("bytes", -1);
      if (cat == "gpu_memcpy" || cat == "gpu_memset") {
        memory_bw_gbps = args_.Number("memory bandwidth (GB/s)", -1);
      }
      if (cat == "cuda_sync") {
        wait_on_stream = args_.Int("wait_on_stream", -1);
        wait_on_record = args_.Int("wait_on_cuda_event_record_corr_id", -1);
      }
    }
    const double dur = w.dur.empty() ? 0 : static_cast<double>(Nanos(w.dur)) / 1000.0;
    observer_(KinetoEvent{info_.rank, cat, Text(w.name, name_scratch_), ts, dur, stream,
                          correlation, bytes, thread, wait_on_stream, wait_on_record,
                          memory_bw_gbps});
  }

  void AddKey(std::string_view key) {
    out_text_ += ",\"";
    out_text_ += key;
    out_text_ += "\":";
  }

  RankTraceInfo& info_;
  MergedTraceFile& out_;
  const KinetoEventObserver& observer_;
  std::map<std::string, Track> tracks_;  // by the file's "pid/tid" text
  std::string key_;
  std::string last_pid_, last_tid_;
  Track* last_track_ = nullptr;  // map nodes stay put
  TraceRecord record_;
  TraceRecord args_;
  std::string ph_scratch_, cat_scratch_, s_scratch_, name_scratch_;
  std::string out_text_;
};

}  // namespace

void ScanKinetoTrace(TraceReader& reader, RankTraceInfo& info) {
  KinetoTraceInfo header = ReadKinetoHeader(reader.path(), reader.header());
  info.kineto = true;
  info.rank = header.rank;
  info.world_size = header.world_size;
  // The first record's time less a margin starts the rank on its own clock (Unix µs).
  std::string text;
  double first_ts = 0;
  TraceRecord record;
  while (reader.NextText(text)) {
    if (!record.Parse(text).empty()) continue;  // pass 2 reports it
    if (record.Find("ts").empty()) continue;
    first_ts = record.Number("ts", 0);
    break;
  }
  // Integer ns: a double of Unix µs would keep only quarter µs.
  const int64_t base_us = header.base_time_ns / 1000;
  // A first ts that is no time (past ±2^53 µs) counts as 0: the rank starts at its base time.
  info.start_us = base_us + TraceIntegerOr(std::floor(first_ts), 0) - kStartMarginUs;
  // The merge adds shift_us (start_us onto the common clock) to this in MergeTimelines.
  info.kineto_shift_ns = (base_us - info.start_us) * 1000 + header.base_time_ns % 1000;
}

void MergeKinetoRank(RankTraceInfo& info, MergedTraceFile& out,
                     const KinetoEventObserver& observer) {
  KinetoRankMerger(info, out, observer).Run();
}

}  // namespace dtrain
