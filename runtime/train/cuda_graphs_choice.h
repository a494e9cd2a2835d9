// --cuda-graphs off|on|auto for one run: whether the steps go through a CapturedStep (static
// buffers, fused AdamW, with more than one rank a fixed gradient sync) and whether that step is
// captured as a CUDA graph. Torch-free.
#pragma once

#include <string>

namespace dtrain::clip {

struct CudaGraphsChoice {
  bool static_step = false;  // the step runs through CapturedStep
  bool capture = false;      // ... and is captured (CUDA only)
  std::string note;          // why, for the start banner ("" when off as asked)
};

// What the choice depends on besides the mode.
struct CudaGraphsRun {
  bool cuda = false;
  int world_size = 1;
  std::string backend;  // of the ranks' collectives when world_size > 1: gloo | nccl
  bool hierarchical_allreduce = false;
  int accum_freq = 1;
  double grad_clip_norm = 0;
};

// `on` where the step cannot be captured throws std::runtime_error saying why: collectives of a
// backend a graph cannot hold (Gloo on CUDA), --hierarchical-allreduce (two levels, agreed on the
// host), --accum-freq > 1 (several micro-batches), --grad-clip-norm (reads the norm back). With
// more than one rank the step averages gradients by a fixed sequence of allreduces
// (static_gradient_sync.h). `on` on the CPU runs the same static-buffer step eagerly (nothing to
// capture; Gloo). `auto`: captured on CUDA when nothing stands in the way, else the ordinary
// eager step.
CudaGraphsChoice ChooseCudaGraphs(const std::string& mode, const CudaGraphsRun& run);

}  // namespace dtrain::clip
