// CudaEventClock: DeviceSpanRing's device side on a GPU: CUDA events (with timing) recorded on
// the current stream of one device, from a pool that grows to the ring's size and is reused.
// The host clock is the timeline's (Timeline::NowMicros), so resolved spans land in the trace.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "runtime/trace/device_span_ring.h"

namespace dtrain::clip {

// nullptr where this build has no CUDA or `device` is not a CUDA device.
std::unique_ptr<DeviceEventClock> MakeCudaEventClock(const torch::Device& device);

}  // namespace dtrain::clip
