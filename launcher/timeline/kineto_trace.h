// PyTorch profiler (Kineto) traces: what their header says (rank, world size, clock base, schema
// version), and the names HolisticTraceAnalysis (HTA) uses to sort GPU activity into compute,
// communication and memory. The one place that knows Kineto's vocabulary; the merge and the GPU
// time summary both read it from here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dtrain {

// The Kineto schema versions this reader understands.
constexpr int kKinetoSchemaVersion = 1;

// What a Kineto trace's header says about its rank and clock.
struct KinetoTraceInfo {
  int schema_version = 0;
  int rank = -1;             // distributedInfo.rank; -1 when the job was not distributed
  int world_size = 0;        // distributedInfo.world_size
  std::string backend;       // distributedInfo.backend (nccl, gloo, ...)
  int64_t base_time_ns = 0;  // baseTimeNanoseconds: Unix time of ts 0, in ns
};

// True when a trace object's header (the members besides traceEvents) is a Kineto trace's.
bool IsKinetoHeader(const nlohmann::json& header);
// Reads the header of `path`. Throws dtrain::Error naming the file for an unknown schema
// version or a malformed distributedInfo.
KinetoTraceInfo ReadKinetoHeader(const std::string& path, const nlohmann::json& header);

// What a GPU activity (cat kernel, gpu_memcpy, gpu_memset) does, by its name, as HTA sorts
// them: communication ^nccl.*Kernel; memory ^Memcpy, ^Memset, ^dma; other: names HTA counts
// neither as compute nor as the above (.*Sync, Memcpy/Memset elsewhere in the name); compute:
// the rest.
enum class GpuActivityKind : uint8_t { kCompute, kCommunication, kMemory, kOther };
GpuActivityKind ClassifyGpuActivity(std::string_view name);
// The trace-event categories of GPU activity.
bool IsGpuActivityCategory(std::string_view cat);

// The CPU-side call that put a GPU activity on a stream, by its name: the runtime calls HTA's
// CUDA kernel launch stats count (cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync,
// cudaMemsetAsync), the driver's own launches (cuLaunchKernel, cuLaunchKernelEx: CUDA 12 and later
// libraries launch this way, and HTA 0.5 does not count them), or none of these.
enum class LaunchCallKind : uint8_t { kNone, kRuntime, kDriver };
LaunchCallKind ClassifyLaunchCall(std::string_view name);

// A collective as the CPU side records it: torch's c10d record_function ("nccl:all_reduce",
// "gloo:broadcast", ...), category user_annotation.
bool IsCollectiveAnnotation(std::string_view cat, std::string_view name);

// True when a user_annotation named `name` marks one step: `step_name` ("" : every
// ProfilerStep#N, as torch.profiler writes at each prof.step()).
bool IsStepAnnotation(std::string_view step_name, std::string_view name);

// One Kineto event as the merge places it on the common clock, for the summary.
struct KinetoEvent {
  int rank;
  std::string_view cat;
  std::string_view name;
  double ts_us;         // merged clock
  double dur_us;        // 'X' events; 0 otherwise
  int64_t stream;       // args.stream: GPU activity; -1 on the CPU side
  int64_t correlation;  // args.correlation (a launch and its GPU activity share it); -1: none
  int64_t bytes;        // args.bytes of a memcpy; -1: none
  int thread = -1;      // the event's track in the merged trace (one per pid/tid of the file)
  // A synchronisation record (cat cuda_sync) that waited on a CUDA event: the stream the event was
  // recorded on and the correlation of its cudaEventRecord (args.wait_on_stream,
  // args.wait_on_cuda_event_record_corr_id); -1: none.
  int64_t wait_on_stream = -1;
  int64_t wait_on_record = -1;
  // A copy's or set's bandwidth as Kineto gives it (args "memory bandwidth (GB/s)"); -1: none.
  double memory_bw_gbps = -1;
};
using KinetoEventObserver = std::function<void(const KinetoEvent&)>;

}  // namespace dtrain
