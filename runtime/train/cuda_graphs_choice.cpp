#include "runtime/train/cuda_graphs_choice.h"

#include <stdexcept>

namespace dtrain::clip {
namespace {

// What keeps this run's step out of a graph; "" when nothing does.
std::string Obstacle(const CudaGraphsRun& run) {
  if (run.world_size > 1 && run.cuda && run.backend != "nccl") {
    return "--dist-backend " + run.backend + " (only NCCL collectives can be captured)";
  }
  if (run.world_size > 1 && run.hierarchical_allreduce) {
    return "--hierarchical-allreduce (its two levels are agreed on the host)";
  }
  if (run.accum_freq > 1) {
    return "--accum-freq " + std::to_string(run.accum_freq) + " (one micro-batch)";
  }
  if (run.grad_clip_norm > 0) return "--grad-clip-norm (reads the norm back to the host)";
  return "";
}

std::string Ranks(const CudaGraphsRun& run) {
  if (run.world_size <= 1) return "";
  return ", gradients averaged by a fixed sequence of " + run.backend + " allreduces";
}

}  // namespace

CudaGraphsChoice ChooseCudaGraphs(const std::string& mode, const CudaGraphsRun& run) {
  CudaGraphsChoice choice;
  if (mode == "off") return choice;
  if (mode != "on" && mode != "auto") {
    throw std::invalid_argument("--cuda-graphs: expected off|on|auto, got '" + mode + "'");
  }
  const std::string obstacle = Obstacle(run);
  if (!obstacle.empty()) {
    if (mode == "on") throw std::runtime_error("--cuda-graphs on: not possible with " + obstacle);
    choice.note = "eager: " + obstacle;
    return choice;
  }
  if (!run.cuda) {
    if (mode == "auto") {
      choice.note = "eager: not on CUDA";
      return choice;
    }
    choice.static_step = true;
    choice.note = "static-buffer step, run eagerly (nothing to capture on the CPU)" + Ranks(run);
    return choice;
  }
  choice.static_step = choice.capture = true;
  choice.note = "captured" + Ranks(run);
  return choice;
}

}  // namespace dtrain::clip
