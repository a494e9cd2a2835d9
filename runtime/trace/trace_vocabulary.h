// The words of a dtrain-clip trace (DESIGN.md "Timelines"): the activity names Horovod's timeline
// uses, the tracks, the arg keys `dtrain timeline --summary` reads, and the metadata records.
// The writers in runtime/ and the readers in launcher/ both spell them from here. Torch-free.
#pragma once

namespace dtrain::trace {

// Activities (span names). Collectives are named as Horovod names them; NCCL_/GLOO_ prefixes
// name the backend's part of an allreduce.
inline constexpr char kAllreduce[] = "ALLREDUCE";
inline constexpr char kAllgather[] = "ALLGATHER";
inline constexpr char kReduce[] = "REDUCE";
inline constexpr char kBroadcast[] = "BROADCAST";
inline constexpr char kBarrier[] = "BARRIER";
inline constexpr char kNcclAllreduce[] = "NCCL_ALLREDUCE";
inline constexpr char kGlooAllreduce[] = "GLOO_ALLREDUCE";
inline constexpr char kQueue[] = "QUEUE";  // a gradient is ready and waits for its bucket
inline constexpr char kMemcpyInFusionBuffer[] = "MEMCPY_IN_FUSION_BUFFER";
inline constexpr char kMemcpyOutFusionBuffer[] = "MEMCPY_OUT_FUSION_BUFFER";
inline constexpr char kCycleStart[] = "CYCLE_START";
// Prefixes of waiting activities (Horovod's WAIT_FOR_DATA, WAIT_FOR_OTHER_TENSOR_DATA,
// NEGOTIATE_ALLREDUCE, ...).
inline constexpr char kWaitPrefix[] = "WAIT";
inline constexpr char kNegotiatePrefix[] = "NEGOTIATE";
// The training step's phases, on the compute track.
inline constexpr char kData[] = "DATA";
inline constexpr char kWaitForData[] = "WAIT_FOR_DATA";  // blocked on the loader, inside DATA
inline constexpr char kForward[] = "FORWARD";
inline constexpr char kBackward[] = "BACKWARD";
inline constexpr char kOptimizer[] = "OPTIMIZER";  // ends a step
// --cuda-graphs: forward, backward and optimizer in one captured step (host time of the replay's
// launch, or of the eager static-buffer step); ends a step as OPTIMIZER does.
inline constexpr char kGraphStep[] = "GRAPH_STEP";

// Tracks (a thread per track in the trace).
inline constexpr char kComputeTrack[] = "compute";
inline constexpr char kAllgatherTrack[] = "allgather";
// --gpu-timed-spans: FORWARD, BACKWARD, OPTIMIZER, GRAPH_STEP timed by CUDA events (the device's
// clock), beside the compute track's host-timed spans. Written a step or more late.
inline constexpr char kGpuTrack[] = "gpu";

// Arg keys of collective spans.
inline constexpr char kArgBytes[] = "bytes";      // payload
inline constexpr char kArgTensors[] = "tensors";  // tensors fused into one collective
inline constexpr char kArgDtype[] = "dtype";
inline constexpr char kArgInPlace[] = "in_place";  // a fused buffer that is a view, no copies

// Metadata records ("ph": "M") and their args.
inline constexpr char kProcessName[] = "process_name";
inline constexpr char kProcessSortIndex[] = "process_sort_index";
inline constexpr char kThreadName[] = "thread_name";
inline constexpr char kClockOffset[] = "clock_offset";
inline constexpr char kArgName[] = "name";
inline constexpr char kArgSortIndex[] = "sort_index";
inline constexpr char kArgStartTime[] = "start_time_since_epoch_in_micros";
inline constexpr char kArgRank[] = "rank";
inline constexpr char kArgHost[] = "host";
inline constexpr char kArgClockOffsetUs[] = "clock_offset_us";
inline constexpr char kArgClockRttUs[] = "clock_rtt_us";

}  // namespace dtrain::trace
