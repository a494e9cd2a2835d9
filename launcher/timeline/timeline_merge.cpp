// Two streaming passes: the first reads only metadata records (start time, rank, host, clock
// offset) to fix the common clock; the second rewrites every record onto it. Metadata records
// go through nlohmann::json; the many span and instant records are rewritten as text (ts, pid,
// tid replaced, every other field copied as written), which is what makes the merge fast.
#include "launcher/timeline/timeline_merge.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/timeline/kineto_rank_merge.h"
#include "launcher/timeline/merged_trace_file.h"
#include "launcher/timeline/trace_reader.h"
#include "launcher/timeline/trace_record.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "rank-3.json" -> 3; -1 when the name carries no rank.
int RankFromFileName(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  size_t at = name.rfind("rank-");
  if (at == std::string::npos) return -1;
  size_t i = at + 5;
  int rank = -1;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') {
    rank = (rank < 0 ? 0 : rank * 10) + (name[i] - '0');
    if (rank > 1000000) return -1;
    ++i;
  }
  return rank;
}

json ParseRecord(const TraceReader& reader, const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: record {}: {}", reader.path(), reader.records(), e.what()));
  }
}

int64_t IntOr(const json& object, const char* key, int64_t fallback) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return fallback;
  return TraceIntegerOr(it->get<double>(), fallback);  // exact for every trace integer
}

// Pass 1: the metadata that places this file on the common clock.
RankTraceInfo ScanMetadata(const std::string& path) {
  RankTraceInfo info;
  info.path = path;
  TraceReader reader(path);
  if (reader.object_form()) {
    if (!IsKinetoHeader(reader.header())) {
      throw Error(fmt::format(
          "{}: not a Chrome trace-event array, nor a PyTorch profiler trace (a JSON object "
          "without schemaVersion, baseTimeNanoseconds or distributedInfo)",
          path));
    }
    ScanKinetoTrace(reader, info);
    if (info.rank < 0) info.rank = RankFromFileName(path);
    return info;
  }
  std::string text;
  bool have_start = false;
  while (!(have_start && info.has_clock_offset) && reader.NextText(text)) {
    if (text.find("\"M\"") == std::string::npos) continue;
    json record = ParseRecord(reader, text);
    if (record.value("ph", "") != "M" || !record.contains("args")) continue;
    const json& args = record["args"];
    std::string name = record.value("name", "");
    if (name == trace::kProcessName && args.contains(trace::kArgStartTime)) {
      have_start = true;
      info.start_us = IntOr(args, trace::kArgStartTime, 0);
      info.rank = static_cast<int>(IntOr(args, trace::kArgRank, -1));
      if (args.contains(trace::kArgHost) && args[trace::kArgHost].is_string()) {
        info.host = args[trace::kArgHost];
      }
    } else if (name == trace::kClockOffset) {
      info.has_clock_offset = true;
      info.clock_offset_us = IntOr(args, trace::kArgClockOffsetUs, 0);
      info.clock_rtt_us = IntOr(args, trace::kArgClockRttUs, 0);
    }
  }
  if (info.rank < 0) info.rank = RankFromFileName(path);
  return info;
}

// Ranks for files that name none, and no two files of one kind on one rank. PyTorch traces
// name their rank themselves: two of one rank, or of different world sizes, are an error.
void AssignRanks(std::vector<RankTraceInfo>& ranks, std::vector<std::string>& warnings) {
  std::map<int, const RankTraceInfo*> kineto_by_rank;
  const RankTraceInfo* sized = nullptr;
  for (const RankTraceInfo& info : ranks) {
    if (!info.kineto) continue;
    if (info.world_size > 0 && sized && sized->world_size != info.world_size) {
      throw Error(fmt::format(
          "{}: rank {} of world size {}, but {} is rank {} of world size {}: "
          "traces of different jobs?",
          info.path, info.rank, info.world_size, sized->path, sized->rank, sized->world_size));
    }
    if (info.world_size > 0) sized = &info;
    if (info.rank < 0) continue;
    auto [it, added] = kineto_by_rank.emplace(info.rank, &info);
    if (!added) {
      throw Error(fmt::format("{}: rank {} again (also in {}): give one PyTorch trace per rank",
                              info.path, info.rank, it->second->path));
    }
  }
  for (const bool kineto : {false, true}) {
    std::set<int> taken;
    std::vector<RankTraceInfo*> unplaced;
    for (RankTraceInfo& info : ranks) {
      if (info.kineto != kineto) continue;
      if (info.rank >= 0 && taken.insert(info.rank).second) continue;
      if (info.rank >= 0) {
        warnings.push_back(fmt::format(
            "{}: rank {} appears in another file too; given a new number", info.path, info.rank));
      }
      unplaced.push_back(&info);
    }
    int next = 0;
    for (RankTraceInfo* info : unplaced) {
      int from_name = RankFromFileName(info->path);
      if (from_name >= 0 && taken.insert(from_name).second) {
        info->rank = from_name;
        continue;
      }
      while (taken.count(next)) ++next;
      info->rank = next;
      taken.insert(next);
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const RankTraceInfo& a, const RankTraceInfo& b) { return a.rank < b.rank; });
}

void PlaceOnCommonClock(std::vector<RankTraceInfo>& ranks, std::vector<std::string>& warnings) {
  int64_t base = INT64_MAX;
  for (const RankTraceInfo& info : ranks)
    base = std::min(base, info.start_us + info.clock_offset_us);
  for (RankTraceInfo& info : ranks) {
    info.shift_us = info.start_us + info.clock_offset_us - base;
    if (ranks.size() > 1 && info.rank != 0 && !info.has_clock_offset && !info.kineto) {
      warnings.push_back(
          fmt::format("{}: rank {} recorded no clock offset to rank 0; its own clock is used",
                      info.path, info.rank));
    }
  }
}

const std::string kUnnamedSpan;

// One source track (a pid in the rank's file) becoming a thread of the rank's process.
struct ThreadState {
  std::string name;
  bool named = false;
  // Names of the spans begun and not yet ended, innermost last. Past kMaxOpenNames (a writer that
  // never ends its spans) only the count is kept, so memory stays bounded; those are ended
  // without a name.
  static constexpr size_t kMaxOpenNames = 4096;
  std::vector<std::string> open;
  uint64_t open_unnamed = 0;
  int64_t last_ts = INT64_MIN;
};

// Pass 2 for one rank.
class RankMerger {
 public:
  RankMerger(RankTraceInfo& info, MergedTraceFile& out, const MergedEventObserver& observer,
             std::vector<std::string>& warnings)
      : info_(info), out_(out), observer_(observer), warnings_(warnings) {}

  void Run(int64_t base_us) {
    WriteProcessHeader(info_, out_, base_us);
    TraceReader reader(info_.path);
    std::string text;
    while (reader.NextText(text)) {
      try {
        Take(reader, text);
      } catch (const json::exception& e) {  // a value nlohmann refuses: say where it is
        throw Error(fmt::format("{}: rank {}: record {}: {}", reader.path(), info_.rank,
                                reader.records(), e.what()));
      }
    }
    info_.truncated = reader.truncated();
    if (info_.truncated) {
      warnings_.push_back(
          fmt::format("rank {}: {} (the rank was killed?); merged what was complete", info_.rank,
                      reader.truncation_note()));
    }
    CloseOpenSpans();
    if (unmatched_ends_ > 0) {
      warnings_.push_back(fmt::format("rank {}: {} span ends without a begin were dropped",
                                      info_.rank, unmatched_ends_));
    }
    if (clamped_ > 0) {
      warnings_.push_back(fmt::format(
          "rank {}: {} timestamps earlier than their thread's previous one were moved up to it",
          info_.rank, clamped_));
    }
  }

  // The rank's process: its name, its clock, its place (also for a rank's PyTorch trace).
  static void WriteProcessHeader(const RankTraceInfo& info, MergedTraceFile& out, int64_t base_us) {
    std::string label = info.host.empty() ? fmt::format("rank {}", info.rank)
                                          : fmt::format("rank {} ({})", info.rank, info.host);
    json args = {{trace::kArgName, label}, {trace::kArgStartTime, base_us}};
    if (info.has_clock_offset) {
      args[trace::kArgClockOffsetUs] = info.clock_offset_us;
      args[trace::kArgClockRttUs] = info.clock_rtt_us;
    }
    out.Write({{"name", trace::kProcessName}, {"ph", "M"}, {"pid", info.rank}, {"args", args}});
    out.Write({{"name", trace::kProcessSortIndex},
               {"ph", "M"},
               {"pid", info.rank},
               {"args", {{trace::kArgSortIndex, info.rank}}}});
  }

 private:
  void NameThread(int tid, const std::string& name) {
    ThreadState& thread = threads_[tid];
    if (thread.named && thread.name == name) return;
    thread.name = name;
    thread.named = true;
    out_.Write({{"name", trace::kThreadName},
                {"ph", "M"},
                {"pid", info_.rank},
                {"tid", tid},
                {"args", {{"name", name}}}});
  }

  void TakeMetadata(json& record) {
    int pid = static_cast<int>(IntOr(record, "pid", 0));
    const json& given = record.value("name", json());
    const std::string name = given.is_string() ? given.get<std::string>() : "";
    if (pid == 0) return;  // the rank's own header and clock: already in the process header
    if (name == trace::kProcessName && record.contains("args") && record["args"].is_object()) {
      const json& given = record["args"].value(trace::kArgName, json());
      NameThread(pid, given.is_string() ? given.get<std::string>() : fmt::format("track {}", pid));
    } else if (name == trace::kProcessSortIndex) {
      out_.Write({{"name", "thread_sort_index"},
                  {"ph", "M"},
                  {"pid", info_.rank},
                  {"tid", pid},
                  {"args", {{trace::kArgSortIndex, pid}}}});
    }
  }

  void Take(const TraceReader& reader, const std::string& text) {
    record_.ParseOrThrow(text, reader.path(), reader.records());
    const std::string phase = record_.String("ph");
    if (phase == "M") {
      json record = ParseRecord(reader, text);
      return TakeMetadata(record);
    }
    if (phase.empty() || record_.Find("ts").empty()) return;
    const int tid = static_cast<int>(record_.Int("pid", 0));
    ThreadState& thread = threads_[tid];
    if (!thread.named) NameThread(tid, tid == 0 ? "markers" : fmt::format("track {}", tid));
    int64_t ts = record_.Int("ts", 0) + info_.shift_us;
    if (ts < thread.last_ts) {
      ts = thread.last_ts;
      ++clamped_;
    }
    thread.last_ts = ts;
    rank_last_ts_ = std::max(rank_last_ts_, ts);
    std::string name = record_.String("name");
    const bool ends = phase == "E";
    // A global marker becomes one rank's: "s": "p".
    const bool global = phase == "i" && record_.String("s") == "g";
    bool end_unnamed = false;
    if (phase == "B") {
      if (thread.open.size() < ThreadState::kMaxOpenNames) {
        thread.open.push_back(name);
      } else {
        ++thread.open_unnamed;
      }
    } else if (ends) {
      if (thread.open_unnamed > 0) {
        --thread.open_unnamed;
        end_unnamed = true;
      } else if (thread.open.empty()) {
        ++unmatched_ends_;
        return;
      } else {
        name = thread.open.back();
        thread.open.pop_back();
      }
    }
    out_text_.assign(1, '{');
    for (const TraceRecord::Field& field : record_.fields()) {
      if (field.key == "ts" || field.key == "pid" || field.key == "tid" ||
          (ends && !end_unnamed && field.key == "name") || (global && field.key == "s"))
        continue;
      AppendRecordField(out_text_, field.key, field.value);
    }
    if (ends && !end_unnamed) AppendRecordField(out_text_, "name", EncodeJsonString(name));
    if (global) AppendRecordField(out_text_, "s", "\"p\"");
    AppendRecordField(out_text_, "ts", std::to_string(ts));
    AppendRecordField(out_text_, "pid", std::to_string(info_.rank));
    AppendRecordField(out_text_, "tid", std::to_string(tid));
    out_text_ += '}';
    out_.WriteText(out_text_);
    ++info_.events;
    if (!observer_) return;
    static const json kNoArgs = json::object();
    json parsed;  // only records with args pay for a tree
    if (std::string_view text_args = record_.Find("args"); !text_args.empty()) {
      parsed = json::parse(text_args);
    }
    observer_(MergedEvent{info_.rank, tid, threads_[tid].name, phase[0], name, ts,
                          record_.Int("dur", 0), parsed.is_null() ? kNoArgs : parsed});
  }

  void Emit(const json& record, int tid, char phase, const std::string& name, int64_t ts) {
    out_.Write(record);
    ++info_.events;
    if (!observer_) return;
    static const json kNoArgs = json::object();
    auto args = record.find("args");
    observer_(MergedEvent{info_.rank, tid, threads_[tid].name, phase, name, ts,
                          IntOr(record, "dur", 0), args == record.end() ? kNoArgs : *args});
  }

  void CloseOpenSpans() {
    size_t closed = 0;
    for (auto& [tid, thread] : threads_) {
      for (; thread.open_unnamed > 0; --thread.open_unnamed, ++closed) {
        const std::string& unnamed = kUnnamedSpan;
        Emit({{"ph", "E"},
              {"ts", rank_last_ts_},
              {"pid", info_.rank},
              {"tid", tid},
              {"args", {{"closed_by_merge", true}}}},
             tid, 'E', unnamed, rank_last_ts_);
      }
      while (!thread.open.empty()) {
        std::string name = thread.open.back();
        thread.open.pop_back();
        json record = {{"ph", "E"},         {"name", name}, {"ts", rank_last_ts_},
                       {"pid", info_.rank}, {"tid", tid},   {"args", {{"closed_by_merge", true}}}};
        Emit(record, tid, 'E', name, rank_last_ts_);
        ++closed;
      }
    }
    if (closed > 0) {
      warnings_.push_back(
          fmt::format("rank {}: {} spans never ended; closed at the rank's last timestamp",
                      info_.rank, closed));
    }
  }

  RankTraceInfo& info_;
  MergedTraceFile& out_;
  const MergedEventObserver& observer_;
  std::vector<std::string>& warnings_;
  std::map<int, ThreadState> threads_;
  int64_t rank_last_ts_ = 0;
  uint64_t unmatched_ends_ = 0;
  uint64_t clamped_ = 0;
  TraceRecord record_;    // the record being merged (views into the reader's text)
  std::string out_text_;  // its rewritten text
};

void RefuseOverwritingAnInput(const std::vector<std::string>& inputs, const std::string& output) {
  std::error_code ec;
  for (const std::string& input : inputs) {
    if (fs::exists(output, ec) && fs::equivalent(input, output, ec)) {
      throw UsageError(fmt::format("{}: is an input; choose another output with -o", output));
    }
  }
}

}  // namespace

MergeResult MergeTimelines(
    const std::vector<std::string>& inputs, const std::string& output,
    const MergedEventObserver& observer, const std::map<int, std::string>& hosts,
    const std::map<int, int64_t>& clock_offsets_us, const KinetoEventObserver& kineto_observer,
    const std::function<void(int rank, MergedTraceFile&)>& kineto_rank_done) {
  if (inputs.empty()) throw UsageError("no timeline files to merge");
  RefuseOverwritingAnInput(inputs, output);
  MergeResult result;
  for (const std::string& path : inputs) {
    try {
      result.ranks.push_back(ScanMetadata(path));
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: {}", path, e.what()));
    }
  }
  AssignRanks(result.ranks, result.warnings);
  for (RankTraceInfo& info : result.ranks) {
    // The node as the job names it, as dtrain launch and dtrain logs print it ("localhost", an
    // ssh alias), over the hostname the rank recorded: one name for one node everywhere.
    auto host = hosts.find(info.rank);
    if (host != hosts.end() && !host->second.empty()) info.host = host->second;
    auto offset = clock_offsets_us.find(info.rank);
    if (info.kineto && offset != clock_offsets_us.end()) {
      info.has_clock_offset = true;
      info.clock_offset_us = offset->second;
    }
  }
  PlaceOnCommonClock(result.ranks, result.warnings);
  int64_t base = result.ranks.front().start_us + result.ranks.front().clock_offset_us -
                 result.ranks.front().shift_us;
  MergedTraceFile out(output);
  for (RankTraceInfo& info : result.ranks) {
    if (info.kineto) {
      info.kineto_shift_ns += info.shift_us * 1000;
      RankMerger::WriteProcessHeader(info, out, base);
      try {
        MergeKinetoRank(info, out, kineto_observer);
        if (kineto_rank_done) kineto_rank_done(info.rank, out);
      } catch (const json::exception& e) {
        throw Error(fmt::format("{}: rank {}: {}", info.path, info.rank, e.what()));
      }
    } else {
      RankMerger(info, out, observer, result.warnings).Run(base);
    }
    result.events += info.events;
  }
  out.Commit();
  return result;
}

}  // namespace dtrain
