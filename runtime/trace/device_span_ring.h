// DeviceSpanRing: timeline spans timed by the device's own clock (CUDA events on a GPU), resolved
// off the critical path. Begin and End record an event each on the device's stream and return at
// once: nothing waits for the device per span. Poll() (once a step) resolves, oldest first, every
// span whose end event has completed (a query that never blocks) and stops at the first that has
// not, so spans come out in the order they were recorded. Only when `capacity` spans are pending
// does recording wait, for the oldest one: at worst one wait per `capacity` spans, counted.
// Device times are put on the host clock through an anchor: an event waited for once, at
// construction, whose completion instant on the host clock is known; every span's times are its
// events' device time after the anchor's. The anchor moves to a resolved span's end once it is
// more than `reanchor_after_us` old, so elapsed times stay short (CUDA reports them as float
// milliseconds: over long spans the rounding would grow). Torch-free; the device is behind
// DeviceEventClock (CUDA: train/cuda_event_clock.h; a fake in tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>

namespace dtrain::clip {

// The device side: events recorded in stream order, queried without blocking.
class DeviceEventClock {
 public:
  virtual ~DeviceEventClock() = default;
  virtual int Record() = 0;                        // an event on the current stream: its id
  virtual bool Done(int event) = 0;                // completed? never blocks
  virtual void Wait(int event) = 0;                // blocks until completed
  virtual double ElapsedUs(int from, int to) = 0;  // device time between two completed events
  virtual void Release(int event) = 0;             // the id may be reused
  virtual int64_t HostNowUs() = 0;                 // the host clock spans are placed on
};

struct DeviceSpan {
  std::string track;
  const char* activity;
  int64_t begin_us, end_us;  // host clock (DeviceEventClock::HostNowUs), from device times
};

class DeviceSpanRing {
 public:
  using Sink = std::function<void(const DeviceSpan&)>;
  DeviceSpanRing(DeviceEventClock& clock, size_t capacity, Sink sink,
                 int64_t reanchor_after_us = 10'000'000);
  ~DeviceSpanRing();  // waits for and hands over what is still pending (Drain)
  DeviceSpanRing(const DeviceSpanRing&) = delete;
  DeviceSpanRing& operator=(const DeviceSpanRing&) = delete;

  // `activity` must outlive the ring (a string literal). End closes the latest open span of the
  // same track and activity; an End without a Begin is ignored.
  void Begin(const std::string& track, const char* activity);
  void End(const std::string& track, const char* activity);
  // Hands over, in record order, the spans resolved since the last call; never blocks.
  size_t Poll();
  // Waits for every closed span and hands it over (end of training). Open spans are dropped.
  void Drain();

  size_t pending() const { return pending_.size(); }
  int64_t forced_waits() const { return forced_waits_; }  // recordings that waited (ring full)
  int64_t resolved() const { return resolved_; }

 private:
  struct Pending {
    std::string track;
    const char* activity;
    int begin = -1, end = -1;  // event ids; end -1 while open
  };
  void Resolve(Pending& span);
  void MakeRoom();

  DeviceEventClock& clock_;
  size_t capacity_;
  Sink sink_;
  int64_t reanchor_after_us_;
  std::deque<Pending> pending_;
  int anchor_ = -1;
  int64_t anchor_host_us_ = 0;
  int64_t forced_waits_ = 0, resolved_ = 0;
};

}  // namespace dtrain::clip
