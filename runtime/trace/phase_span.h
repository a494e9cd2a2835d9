// PhaseSpan: a phase of the training step (FORWARD, BACKWARD, OPTIMIZER, GRAPH_STEP): on the
// compute track by the host clock, as always, and with --gpu-timed-spans also on the gpu track
// by the device's clock (DeviceSpanRing: events recorded now, resolved a step or more later).
#pragma once

#include "runtime/trace/device_span_ring.h"
#include "runtime/trace/timeline.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain::clip {

class PhaseSpan {
 public:
  // `device_spans`: nullptr for host timing only.
  PhaseSpan(DeviceSpanRing* device_spans, const char* activity)
      : host_(trace::kComputeTrack, activity), device_spans_(device_spans), activity_(activity) {
    if (device_spans_) device_spans_->Begin(trace::kGpuTrack, activity_);
  }
  ~PhaseSpan() {
    if (device_spans_) device_spans_->End(trace::kGpuTrack, activity_);
  }
  PhaseSpan(const PhaseSpan&) = delete;
  PhaseSpan& operator=(const PhaseSpan&) = delete;

 private:
  TimelineSpan host_;
  DeviceSpanRing* device_spans_;
  const char* activity_;
};

}  // namespace dtrain::clip
