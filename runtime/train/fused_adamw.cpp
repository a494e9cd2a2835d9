#include "runtime/train/fused_adamw.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adamw.h>

#include <memory>
#include <stdexcept>

namespace dtrain::clip {

FusedAdamW::FusedAdamW(torch::optim::AdamW& optimizer) : optimizer_(optimizer) {
  for (auto& param_group : optimizer_.param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(param_group.options());
    if (options.amsgrad()) throw std::runtime_error("fused AdamW: amsgrad is not supported");
    Group group;
    group.beta1 = std::get<0>(options.betas());
    group.beta2 = std::get<1>(options.betas());
    group.eps = options.eps();
    group.weight_decay = options.weight_decay();
    for (const torch::Tensor& param : param_group.params()) {
      auto& slot = optimizer_.state()[param.unsafeGetTensorImpl()];
      if (!slot) {
        auto state = std::make_unique<torch::optim::AdamWParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(param, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(param, torch::MemoryFormat::Preserve));
        slot = std::move(state);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      group.params.push_back(param);
      group.exp_avgs.push_back(state.exp_avg());
      group.exp_avg_sqs.push_back(state.exp_avg_sq());
      group.steps.push_back(
          torch::full({}, static_cast<double>(state.step()), param.options().dtype(torch::kFloat)));
    }
    groups_.push_back(std::move(group));
  }
}

void FusedAdamW::Step(const torch::Tensor& lr) {
  torch::NoGradGuard no_grad;
  for (Group& group : groups_) {
    if (group.params.empty()) continue;
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& param : group.params) grads.push_back(param.grad());
    at::_foreach_add_(group.steps, 1);  // the kernel reads the count, it does not advance it
    at::_fused_adamw_(group.params, grads, group.exp_avgs, group.exp_avg_sqs, {}, group.steps, lr,
                      group.beta1, group.beta2, group.weight_decay, group.eps,
                      /*amsgrad=*/false, /*maximize=*/false);
  }
}

void FusedAdamW::SyncStepCounts() {
  for (Group& group : groups_) {
    for (size_t i = 0; i < group.params.size(); ++i) {
      auto& state = static_cast<torch::optim::AdamWParamState&>(
          *optimizer_.state().at(group.params[i].unsafeGetTensorImpl()));
      state.step(static_cast<int64_t>(group.steps[i].item<double>()));
    }
  }
}

std::vector<torch::Tensor> FusedAdamW::StateTensors() const {
  std::vector<torch::Tensor> all;
  for (const Group& group : groups_) {
    for (size_t i = 0; i < group.params.size(); ++i) {
      all.push_back(group.params[i]);
      all.push_back(group.exp_avgs[i]);
      all.push_back(group.exp_avg_sqs[i]);
      all.push_back(group.steps[i]);
    }
  }
  return all;
}

}  // namespace dtrain::clip
