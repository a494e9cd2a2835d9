#include "runtime/train/step_rig.h"

#include "runtime/config/model_config.h"
#include "runtime/train/graph_train_step.h"

namespace dtrain::clip {

StepRig::StepRig(uint64_t seed, const torch::Device& device) {
  torch::manual_seed(seed);
  model = ClipModel(PresetModelConfig("fmnist-tiny"));
  model->to(device);
  flat = std::make_unique<FlatParameters>(WeightDecayGroups(*model));
  adamw = MakeFlatAdamW(*flat, torch::optim::AdamWOptions(1e-3).betas({0.9, 0.98}).eps(1e-6), 0.1);
  fused = std::make_unique<FusedAdamW>(*adamw);
}

CapturedStep::StepFunction StepRig::Step(bool bf16, bool whole_text, bool weight_copies) {
  if (bf16 && weight_copies && !copies) {
    copies = std::make_unique<WeightCopies>(MatrixWeights(*model), torch::kBFloat16);
  }
  return MakeGraphTrainStep(model, *flat, *fused, one_rank, bf16, whole_text,
                            bf16 && weight_copies ? copies.get() : nullptr);
}

std::vector<torch::Tensor> TinyStepInputs(int64_t rows, uint64_t seed, double lr,
                                          const torch::Device& device) {
  torch::manual_seed(seed);
  const ModelConfig config = PresetModelConfig("fmnist-tiny");
  auto images = torch::randn(
      {rows, config.vision.channels, config.vision.image_size, config.vision.image_size});
  auto tokens = torch::randint(1, config.text.vocab_size - 1, {rows, config.text.context_length},
                               torch::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t end = 3 + (r * 5 + static_cast<int64_t>(seed)) % 10;
    tokens[r][end] = config.text.vocab_size - 1;
    tokens[r].narrow(0, end + 1, config.text.context_length - end - 1).zero_();
  }
  return {images.to(device), tokens.to(device),
          torch::full({}, lr, torch::TensorOptions().dtype(torch::kFloat).device(device))};
}

}  // namespace dtrain::clip
