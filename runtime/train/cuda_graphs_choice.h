// --cuda-graphs off|on|auto for one run: whether the steps go through a CapturedStep (static
// buffers, fused AdamW) and whether that step is captured as a CUDA graph. Torch-free.
#pragma once

#include <string>

namespace dtrain::clip {

struct CudaGraphsChoice {
  bool static_step = false;  // the step runs through CapturedStep
  bool capture = false;      // ... and is captured (CUDA only)
  std::string note;          // why, for the start banner ("" when off as asked)
};

// `on` where the step cannot be captured throws std::runtime_error saying why: the gradient sync
// agrees with other ranks on the host (world size > 1), --accum-freq > 1 runs several
// micro-batches, --grad-clip-norm reads the norm back. `on` on the CPU runs the same static-buffer
// step eagerly (nothing to capture). `auto`: captured on CUDA when nothing stands in the way,
// else the ordinary eager step.
CudaGraphsChoice ChooseCudaGraphs(const std::string& mode, bool cuda, int world_size,
                                  int accum_freq, double grad_clip_norm);

}  // namespace dtrain::clip
