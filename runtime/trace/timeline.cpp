// The per-rank trace writer. Producers stamp and enqueue records under one lock (so the file is
// in timestamp order); a background thread formats batches and appends them with one pwrite that
// overwrites the closing ']' of the previous batch, so the file is a complete JSON array whenever
// it is read, even after the process is killed.
#include "runtime/trace/timeline.h"
#include "runtime/formats/json_object.h"
#include "runtime/formats/json_text.h"
#include "runtime/trace/trace_vocabulary.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtrain::clip {
namespace {

using Clock = std::chrono::steady_clock;

// Records waiting for the writer; beyond this many a producer waits (backpressure, never loss).
constexpr size_t kQueueCapacity = 1 << 16;
// The writer appends at least this often, so a killed rank loses at most this much of its trace.
constexpr std::chrono::milliseconds kFlushInterval{100};
// ... or as soon as this many records are waiting.
constexpr size_t kBatchRecords = 4096;

enum class RecordKind { kBegin, kEnd, kInstant, kClockOffset };

struct Record {
  RecordKind kind;
  std::string track;
  const char* name;
  std::string args;
  int64_t ts_us;
};

// A metadata record ("ph": "M") of the Chrome trace format; `args_body`: its args, no braces.
std::string MetadataRecord(const char* name, int pid, const std::string& args_body) {
  return "{" + JsonObject().Add("name", name).Add("ph", "M").Add("pid", pid).Body() +
         ",\"args\":{" + args_body + "}}";
}
std::string MetadataRecord(const char* name, int pid, const JsonObject& args) {
  return MetadataRecord(name, pid, args.Body());
}

int64_t EpochMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Timeline::Impl {
  int fd = -1;
  std::string path;
  int rank = 0;
  std::string host;
  Clock::time_point start;
  int64_t start_epoch_us = 0;
  off_t file_size = 0;  // bytes on disk; the last one is always ']'
  bool write_failed = false;

  std::mutex mu;
  std::condition_variable work_ready;   // writer waits: records, flush request or close
  std::condition_variable space_ready;  // producers wait: queue below capacity; Flush() waits
  std::deque<Record> queue;
  uint64_t enqueued = 0;
  uint64_t written = 0;
  bool flush_requested = false;
  bool closing = false;
  std::thread writer;

  // Writer-thread state: tracks are modelled as processes, as Horovod does (pid 0 is the rank).
  std::unordered_map<std::string, int> track_pid;

  int64_t NowMicros() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  }

  // `stamp`: the record's time is now, taken under the lock, so that file order is timestamp
  // order; false: it carries its own (SpanAt).
  void Push(Record r, bool stamp = true) {
    std::unique_lock<std::mutex> lock(mu);
    space_ready.wait(lock, [&] { return queue.size() < kQueueCapacity || closing; });
    if (closing) return;
    if (stamp) r.ts_us = NowMicros();
    queue.push_back(std::move(r));
    ++enqueued;
    if (queue.size() >= kBatchRecords) work_ready.notify_one();
  }

  // Appends `body` (records, each preceded by ",\n") and a closing ']' in place of the old one.
  void Append(const std::string& body) {
    if (body.empty() || write_failed) return;
    std::string chunk = body;
    chunk += ']';
    off_t at = file_size - 1;
    size_t done = 0;
    while (done < chunk.size()) {
      ssize_t n = pwrite(fd, chunk.data() + done, chunk.size() - done, at + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int error = n < 0 ? errno : EIO;
        // What the disk took of this chunk goes and the old end comes back (within the file as
        // it was, so no new space is needed): the trace stays the valid JSON of the last chunk.
        const bool kept = pwrite(fd, "]", 1, at) == 1 && ::ftruncate(fd, at + 1) == 0;
        std::fprintf(stderr, "dtrain-clip: timeline %s: write failed (%s); trace stops here%s\n",
                     path.c_str(), std::strerror(error),
                     kept ? ", with what was written before" : "");
        write_failed = true;
        return;
      }
      done += static_cast<size_t>(n);
    }
    file_size = at + static_cast<off_t>(chunk.size());
  }

  void FormatTrackHeader(std::string& out, const std::string& track, int pid) {
    out +=
        ",\n" + MetadataRecord(trace::kProcessName, pid, JsonObject().Add(trace::kArgName, track));
    out += ",\n" + MetadataRecord(trace::kProcessSortIndex, pid,
                                  JsonObject().Add(trace::kArgSortIndex, pid));
  }

  int TrackPid(std::string& out, const std::string& track) {
    auto it = track_pid.find(track);
    if (it != track_pid.end()) return it->second;
    int pid = static_cast<int>(track_pid.size()) + 1;
    track_pid.emplace(track, pid);
    FormatTrackHeader(out, track, pid);
    return pid;
  }

  void Format(std::string& out, const Record& r) {
    if (r.kind == RecordKind::kClockOffset) {
      out += ",\n" + MetadataRecord(r.name, 0, r.args);
      return;
    }
    if (r.kind == RecordKind::kInstant && r.track.empty()) {
      // A global marker, exactly as Horovod writes CYCLE_START.
      out += ",\n{\"ph\": \"i\", \"name\": ";
      AppendJsonString(out, r.name);
      out += ", \"ts\": " + std::to_string(r.ts_us) + ", \"s\": \"g\"}";
      return;
    }
    int pid = TrackPid(out, r.track);
    out += ",\n{\"ph\": \"";
    out += r.kind == RecordKind::kBegin ? 'B' : r.kind == RecordKind::kEnd ? 'E' : 'i';
    out += "\", \"name\": ";
    AppendJsonString(out, r.name);
    out += ", \"ts\": " + std::to_string(r.ts_us) + ", \"pid\": " + std::to_string(pid);
    if (r.kind == RecordKind::kInstant) out += ", \"s\": \"p\"";
    if (!r.args.empty()) {
      out += ", \"args\": {";
      out += r.args;
      out += '}';
    }
    out += '}';
  }

  void WriterLoop() {
    std::string body;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work_ready.wait_for(lock, kFlushInterval, [&] {
        return closing || flush_requested || queue.size() >= kBatchRecords;
      });
      std::deque<Record> batch;
      batch.swap(queue);
      bool stop = closing;
      flush_requested = false;
      space_ready.notify_all();
      lock.unlock();
      body.clear();
      for (const Record& r : batch) Format(body, r);
      Append(body);
      lock.lock();
      written += batch.size();
      space_ready.notify_all();
      if (stop && queue.empty()) return;
    }
  }
};

Timeline::Timeline() = default;

Timeline::~Timeline() {
  Close();
}

void Timeline::Open(const std::string& path, int rank, const std::string& host, bool mark_cycles) {
  if (impl_) Close();
  std::error_code ec;  // the folder may not exist yet (<job>/timeline/); open() reports failure
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "dtrain-clip: timeline %s: cannot open (%s); no trace is written\n",
                 path.c_str(), std::strerror(errno));
    return;
  }
  auto* impl = new Impl;
  impl->fd = fd;
  impl->path = path;
  impl->rank = rank;
  impl->host = host;
  impl->start = Clock::now();
  impl->start_epoch_us = EpochMicros();

  // The header: Horovod's process_name record with the start time, plus who wrote it.
  std::string head =
      "[\n" +
      MetadataRecord(trace::kProcessName, 0,
                     JsonObject()
                         .Add(trace::kArgName, "rank " + std::to_string(rank) + " (" + host + ")")
                         .Add(trace::kArgStartTime, impl->start_epoch_us)
                         .Add(trace::kArgRank, rank)
                         .Add(trace::kArgHost, host)) +
      ",\n" +
      MetadataRecord(trace::kProcessSortIndex, 0, JsonObject().Add(trace::kArgSortIndex, 0)) + "]";
  if (::write(fd, head.data(), head.size()) != static_cast<ssize_t>(head.size())) {
    std::fprintf(stderr, "dtrain-clip: timeline %s: cannot write (%s); no trace is written\n",
                 path.c_str(), std::strerror(errno));
    ::close(fd);
    delete impl;
    return;
  }
  impl->file_size = static_cast<off_t>(head.size());
  impl_ = impl;
  impl_->writer = std::thread([impl] { impl->WriterLoop(); });
  mark_cycles_ = mark_cycles;
  enabled_ = true;
  if (clock_offset_set_) SetClockOffset(clock_offset_us_, clock_rtt_us_);
}

bool Timeline::OpenFromEnvironment(int rank, const std::string& host, const std::string& path,
                                   bool mark_cycles) {
  const char* mark = std::getenv("HOROVOD_TIMELINE_MARK_CYCLES");
  mark_cycles = mark_cycles || (mark && *mark && std::strcmp(mark, "0") != 0);
  std::string file = path;
  const char* env = std::getenv("DTRAIN_TIMELINE");
  if (file.empty() && env) file = env;
  env = std::getenv("HOROVOD_TIMELINE");
  // Horovod's convention: one timeline, written by rank 0.
  if (file.empty() && env && rank == 0) file = env;
  if (file.empty()) return false;
  Open(file, rank, host, mark_cycles);
  return enabled_;
}

void Timeline::Begin(const std::string& track, const char* activity, const std::string& args) {
  if (!enabled_) return;
  impl_->Push(Record{RecordKind::kBegin, track, activity, args, 0});
}

void Timeline::End(const std::string& track, const char* activity) {
  if (!enabled_) return;
  impl_->Push(Record{RecordKind::kEnd, track, activity, {}, 0});
}

void Timeline::Instant(const std::string& track, const char* name) {
  if (!enabled_) return;
  impl_->Push(Record{RecordKind::kInstant, track, name, {}, 0});
}

int64_t Timeline::NowMicros() const {
  return enabled_ ? impl_->NowMicros() : 0;
}

void Timeline::SpanAt(const std::string& track, const char* activity, int64_t begin_us,
                      int64_t end_us) {
  if (!enabled_) return;
  impl_->Push(Record{RecordKind::kBegin, track, activity, {}, begin_us}, /*stamp=*/false);
  impl_->Push(Record{RecordKind::kEnd, track, activity, {}, end_us}, /*stamp=*/false);
}

void Timeline::SetClockOffset(int64_t offset_us, int64_t round_trip_us) {
  clock_offset_set_ = true;
  clock_offset_us_ = offset_us;
  clock_rtt_us_ = round_trip_us;
  if (!enabled_) return;
  impl_->Push(Record{RecordKind::kClockOffset,
                     {},
                     trace::kClockOffset,
                     JsonObject()
                         .Add(trace::kArgClockOffsetUs, offset_us)
                         .Add(trace::kArgClockRttUs, round_trip_us)
                         .Body(),
                     0});
}

void Timeline::Flush() {
  if (!enabled_) return;
  std::unique_lock<std::mutex> lock(impl_->mu);
  uint64_t target = impl_->enqueued;
  impl_->flush_requested = true;
  impl_->work_ready.notify_one();
  impl_->space_ready.wait(lock, [&] { return impl_->written >= target; });
}

void Timeline::Close() {
  if (!impl_) return;
  enabled_ = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->closing = true;
  }
  impl_->work_ready.notify_one();
  impl_->space_ready.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();
  if (!impl_->write_failed) {
    // A final newline after ']': the array is complete and no further appends come.
    ssize_t n = pwrite(impl_->fd, "\n", 1, impl_->file_size);
    (void)n;
  }
  ::close(impl_->fd);
  delete impl_;
  impl_ = nullptr;
}

Timeline& GlobalTimeline() {
  static Timeline timeline;
  return timeline;
}

}  // namespace dtrain::clip
