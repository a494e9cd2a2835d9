#include "runtime/trace/device_span_ring.h"

#include <cmath>
#include <cstring>

namespace dtrain::clip {

DeviceSpanRing::DeviceSpanRing(DeviceEventClock& clock, size_t capacity, Sink sink,
                               int64_t reanchor_after_us)
    : clock_(clock),
      capacity_(capacity < 1 ? 1 : capacity),
      sink_(std::move(sink)),
      reanchor_after_us_(reanchor_after_us) {
  // The one wait outside a full ring: the device is idle here after the anchor, so its
  // completion and the host's reading are the same instant, to within the query's latency.
  anchor_ = clock_.Record();
  clock_.Wait(anchor_);
  anchor_host_us_ = clock_.HostNowUs();
}

DeviceSpanRing::~DeviceSpanRing() {
  Drain();
  clock_.Release(anchor_);
}

void DeviceSpanRing::MakeRoom() {
  if (pending_.size() < capacity_) return;
  Pending& oldest = pending_.front();
  if (oldest.end < 0) return;  // still open: nothing to wait for, the ring grows by one
  if (!clock_.Done(oldest.end)) {
    ++forced_waits_;
    clock_.Wait(oldest.end);
  }
  Poll();
}

void DeviceSpanRing::Begin(const std::string& track, const char* activity) {
  MakeRoom();
  Pending span;
  span.track = track;
  span.activity = activity;
  span.begin = clock_.Record();
  pending_.push_back(std::move(span));
}

void DeviceSpanRing::End(const std::string& track, const char* activity) {
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->end < 0 && it->track == track && std::strcmp(it->activity, activity) == 0) {
      it->end = clock_.Record();
      return;
    }
  }
}

void DeviceSpanRing::Resolve(Pending& span) {
  const double begin = clock_.ElapsedUs(anchor_, span.begin);
  const double end = clock_.ElapsedUs(anchor_, span.end);
  DeviceSpan out{span.track, span.activity, anchor_host_us_ + std::llround(begin),
                 anchor_host_us_ + std::llround(end)};
  clock_.Release(span.begin);
  if (end > static_cast<double>(reanchor_after_us_)) {
    clock_.Release(anchor_);
    anchor_ = span.end;
    anchor_host_us_ = out.end_us;
  } else {
    clock_.Release(span.end);
  }
  ++resolved_;
  sink_(out);
}

size_t DeviceSpanRing::Poll() {
  size_t count = 0;
  // Oldest first, and only complete spans: an open or unfinished span holds back those after it,
  // so the sink sees them in record order.
  while (!pending_.empty() && pending_.front().end >= 0 && clock_.Done(pending_.front().end)) {
    Pending span = std::move(pending_.front());
    pending_.pop_front();
    Resolve(span);
    ++count;
  }
  return count;
}

void DeviceSpanRing::Drain() {
  while (!pending_.empty()) {
    Pending span = std::move(pending_.front());
    pending_.pop_front();
    if (span.end < 0) {
      clock_.Release(span.begin);
      continue;
    }
    clock_.Wait(span.end);
    Resolve(span);
  }
}

}  // namespace dtrain::clip
