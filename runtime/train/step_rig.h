// StepRig: the fmnist-tiny model with its flat parameters, LibTorch's AdamW over them and the
// fused AdamW, grouped as the trainer groups them, on one rank; and inputs for its step. What
// `dtrain-clip check` (device_checks.h) and the tests run single training steps with.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/dist/train_collectives.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/weight_copies.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/fused_adamw.h"

namespace dtrain::clip {

struct StepRig {
  ClipModel model{nullptr};
  std::unique_ptr<FlatParameters> flat;
  std::unique_ptr<torch::optim::AdamW> adamw;  // lr 1e-3, betas 0.9/0.98, eps 1e-6, wd 0.1
  std::unique_ptr<FusedAdamW> fused;
  TrainCollectives one_rank;
  std::unique_ptr<WeightCopies> copies;  // made by the first Step() that asks for them

  // The model initialised from `seed`, on `device`.
  explicit StepRig(uint64_t seed, const torch::Device& device = torch::kCPU);
  // The --cuda-graphs training step of this rig (graph_train_step.h), under bf16 autocast if
  // asked (with the matrix weights' bfloat16 copies, as the trainer by default, if asked too),
  // on the whole text context or on tokens cut by the caller.
  CapturedStep::StepFunction Step(bool bf16 = false, bool whole_text = true,
                                  bool weight_copies = false);
};

// A step's inputs {images, tokens, lr} for `rows` samples on `device`: images as the loaders hand
// them, tokens with the end token (the largest id) at a place that varies with row and seed.
std::vector<torch::Tensor> TinyStepInputs(int64_t rows, uint64_t seed, double lr,
                                          const torch::Device& device = torch::kCPU);

}  // namespace dtrain::clip
