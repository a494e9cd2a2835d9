// Kineto records are rewritten as text like dtrain-clip's (trace_record.h): ts, pid, tid (and a
// flow's id) replaced, every other field copied as written. Kineto's own metadata records are
// dropped: the merge names the rank's process and its tracks itself.
#include "launcher/timeline/kineto_rank_merge.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/timeline/trace_record.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain {
namespace {

// Tracks of a PyTorch trace are numbered from here in the rank's process, past the few
// tracks a dtrain-clip trace of the same rank has.
constexpr int kFirstKinetoTid = 100000;
// Flow ids are per file; each rank gets its own range so arrows never cross ranks.
constexpr int64_t kFlowIdsPerRank = int64_t{1} << 40;
// The start placed before the first record's ts: Kineto does not write its events in time order.
constexpr int64_t kStartMarginUs = 1000000;

bool IsGpuTrackCategory(std::string_view cat) {
  return IsGpuActivityCategory(cat) || cat == "gpu_user_annotation";
}

class KinetoRankMerger {
 public:
  KinetoRankMerger(RankTraceInfo& info, MergedTraceFile& out, const KinetoEventObserver& observer)
      : info_(info), out_(out), observer_(observer) {}

  void Run() {
    TraceReader reader(info_.path);
    std::string text;
    while (reader.NextText(text)) Take(reader, text);
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

  void Take(const TraceReader& reader, const std::string& text) {
    std::string problem = record_.Parse(text);
    if (!problem.empty()) {
      throw Error(fmt::format("{}: record {}: {}", reader.path(), reader.records(), problem));
    }
    const std::string phase = record_.String("ph");
    if (phase.empty() || phase == "M" || record_.Find("ts").empty()) return;
    std::string_view pid = record_.Find("pid");
    std::string_view tid = record_.Find("tid");
    key_.assign(pid);
    key_ += '/';
    key_.append(tid);
    auto [it, added] = tracks_.try_emplace(key_);
    Track& track = it->second;
    if (added) track.tid = kFirstKinetoTid + static_cast<int>(tracks_.size()) - 1;
    const std::string cat = record_.String("cat");
    const bool flow = phase == "s" || phase == "t" || phase == "f";
    if (!track.named && !flow) NameTrack(track, pid, tid, cat);
    const double ts = record_.Number("ts", 0) + info_.kineto_shift_us;
    const bool global = phase == "i" && record_.String("s") == "g";
    out_text_.assign(1, '{');
    for (const TraceRecord::Field& field : record_.fields()) {
      if (field.key == "ts" || field.key == "pid" || field.key == "tid" ||
          (global && field.key == "s") || (flow && field.key == "id"))
        continue;
      AddField(field.key, field.value);
    }
    if (global) AddField("s", "\"p\"");
    if (flow) {
      const int64_t id = record_.Int("id", 0);
      AddField("id", std::to_string(static_cast<int64_t>(info_.rank) * kFlowIdsPerRank + id));
    }
    AddField("ts", fmt::format("{:.3f}", ts));
    AddField("pid", std::to_string(info_.rank));
    AddField("tid", std::to_string(track.tid));
    out_text_ += '}';
    out_.WriteText(out_text_);
    ++info_.events;
    if (observer_ && phase == "X") Observe(cat, ts);
  }

  void Observe(const std::string& cat, double ts) {
    int64_t stream = -1;
    int64_t correlation = -1;
    const bool gpu = IsGpuActivityCategory(cat);
    if (gpu || cat == "cuda_runtime" || cat == "cuda_driver") {
      std::string_view args = record_.Find("args");
      if (!args.empty() && args_.Parse(args).empty()) {
        if (gpu) stream = args_.Int("stream", -1);
        correlation = args_.Int("correlation", -1);
      }
    }
    name_ = record_.String("name");
    observer_(
        KinetoEvent{info_.rank, cat, name_, ts, record_.Number("dur", 0), stream, correlation});
  }

  void AddField(std::string_view key, std::string_view value) {
    if (out_text_.size() > 1) out_text_ += ',';
    out_text_ += '"';
    out_text_ += key;
    out_text_ += "\":";
    out_text_ += value;
  }

  RankTraceInfo& info_;
  MergedTraceFile& out_;
  const KinetoEventObserver& observer_;
  std::map<std::string, Track> tracks_;  // by the file's "pid/tid" text
  std::string key_;
  TraceRecord record_;
  TraceRecord args_;
  std::string name_;
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
  // Integer µs apart from the fraction: a double of Unix µs would keep only quarter µs.
  const int64_t base_us = header.base_time_ns / 1000;
  const double base_fraction_us = static_cast<double>(header.base_time_ns % 1000) / 1000.0;
  info.start_us = base_us + static_cast<int64_t>(std::floor(first_ts)) - kStartMarginUs;
  // The merge adds shift_us (start_us onto the common clock) to this in MergeTimelines.
  info.kineto_shift_us = static_cast<double>(base_us - info.start_us) + base_fraction_us;
}

void MergeKinetoRank(RankTraceInfo& info, MergedTraceFile& out,
                     const KinetoEventObserver& observer) {
  KinetoRankMerger(info, out, observer).Run();
}

}  // namespace dtrain
