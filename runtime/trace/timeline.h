// Timeline: this rank's Horovod-style trace (DESIGN.md "Timelines"). Every call is a cheap
// no-op until Open(); records go to a background writer thread through a bounded queue and the
// file on disk is valid JSON at every moment.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain::clip {

class Timeline {
 public:
  Timeline();
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void Open(const std::string& path, int rank, const std::string& host, bool mark_cycles);
  // Opens `path` if given, else DTRAIN_TIMELINE (every rank), else HOROVOD_TIMELINE (rank 0
  // only, as Horovod); `mark_cycles` or HOROVOD_TIMELINE_MARK_CYCLES=1 turns on CYCLE_START
  // marks. False when there is no path or it cannot be opened.
  bool OpenFromEnvironment(int rank, const std::string& host, const std::string& path = {},
                           bool mark_cycles = false);
  bool enabled() const { return enabled_; }
  // A span on the track (thread) named `track`: a tensor, a fusion buffer, or "compute".
  // `args_json` is a JSON object body without braces, e.g. "\"bytes\":1024,\"dtype\":\"float32\"".
  // Args `dtrain timeline --summary` reads: "bytes" (payload), "tensors" (count fused), "dtype".
  // Safe from several threads; `activity` must outlive the timeline (a string literal).
  void Begin(const std::string& track, const char* activity, const std::string& args_json = {});
  void End(const std::string& track, const char* activity);
  void Instant(const std::string& track, const char* name);  // e.g. CYCLE_START
  // The trace's clock: microseconds since Open() (what every record's "ts" counts); 0 when closed.
  int64_t NowMicros() const;
  // A span timed elsewhere (the device's clock, put on this one: DeviceSpanRing), written when it
  // is known, so after records with later times: keep such spans on a track of their own, whose
  // records then stay in time order.
  void SpanAt(const std::string& track, const char* activity, int64_t begin_us, int64_t end_us);
  // An empty `track` makes a global marker, as Horovod writes CYCLE_START.
  bool mark_cycles() const { return mark_cycles_; }
  // Offset of this rank's clock to rank 0's, measured at rendezvous (best of several trips):
  // rank 0's wall clock = this rank's wall clock + offset_us. May be called before Open().
  void SetClockOffset(int64_t offset_us, int64_t round_trip_us);
  // Blocks until everything recorded so far is on disk (the file stays valid JSON throughout).
  void Flush();
  // Drains and closes; call when no other thread is still recording.
  void Close();

 private:
  struct Impl;
  Impl* impl_ = nullptr;
  bool enabled_ = false;
  bool mark_cycles_ = false;
  bool clock_offset_set_ = false;
  int64_t clock_offset_us_ = 0;
  int64_t clock_rtt_us_ = 0;
};

// The process's timeline (one per rank process).
Timeline& GlobalTimeline();

// Begin on construction, End on destruction.
class TimelineSpan {
 public:
  TimelineSpan(const std::string& track, const char* activity, const std::string& args = {})
      : track_(track), activity_(activity) {
    if (GlobalTimeline().enabled()) GlobalTimeline().Begin(track_, activity_, args);
  }
  ~TimelineSpan() {
    if (GlobalTimeline().enabled()) GlobalTimeline().End(track_, activity_);
  }

 private:
  std::string track_;
  const char* activity_;
};

}  // namespace dtrain::clip
