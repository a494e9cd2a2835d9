#include "runtime/train/cuda_graphs_choice.h"

#include <stdexcept>

namespace dtrain::clip {
namespace {

// What keeps this run's step out of a graph; "" when nothing does.
std::string Obstacle(int world_size, int accum_freq, double grad_clip_norm) {
  if (world_size > 1) {
    return "the gradient sync agrees with the other ranks on the host (" +
           std::to_string(world_size) + " ranks)";
  }
  if (accum_freq > 1) return "--accum-freq " + std::to_string(accum_freq) + " (one micro-batch)";
  if (grad_clip_norm > 0) return "--grad-clip-norm (reads the norm back to the host)";
  return "";
}

}  // namespace

CudaGraphsChoice ChooseCudaGraphs(const std::string& mode, bool cuda, int world_size,
                                  int accum_freq, double grad_clip_norm) {
  CudaGraphsChoice choice;
  if (mode == "off") return choice;
  if (mode != "on" && mode != "auto") {
    throw std::invalid_argument("--cuda-graphs: expected off|on|auto, got '" + mode + "'");
  }
  const std::string obstacle = Obstacle(world_size, accum_freq, grad_clip_norm);
  if (!obstacle.empty()) {
    if (mode == "on") throw std::runtime_error("--cuda-graphs on: not possible with " + obstacle);
    choice.note = "eager: " + obstacle;
    return choice;
  }
  if (!cuda) {
    if (mode == "auto") {
      choice.note = "eager: not on CUDA";
      return choice;
    }
    choice.static_step = true;
    choice.note = "static-buffer step, run eagerly (nothing to capture on the CPU)";
    return choice;
  }
  choice.static_step = choice.capture = true;
  choice.note = "captured";
  return choice;
}

}  // namespace dtrain::clip
