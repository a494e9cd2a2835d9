#include "runtime/train/flat_parameters.h"

namespace dtrain::clip {

FlatParameters::FlatParameters(const std::vector<std::vector<torch::Tensor>>& groups) {
  torch::NoGradGuard no_grad;
  for (const auto& group : groups) {
    int64_t total = 0;
    for (const auto& p : group) total += p.numel();
    auto options = group.empty() ? torch::TensorOptions().dtype(torch::kFloat)
                                 : group.front().options().requires_grad(false);
    torch::Tensor buffer = torch::empty({total}, options);
    torch::Tensor grad = torch::zeros({total}, options);
    int64_t offset = 0;
    for (const auto& p : group) {
      const int64_t n = p.numel();
      torch::Tensor value = buffer.narrow(0, offset, n).view(p.sizes());
      value.copy_(p);
      torch::Tensor parameter = p;  // shares the TensorImpl with the module's parameter
      parameter.set_data(value);
      torch::Tensor grad_view = grad.narrow(0, offset, n).view(p.sizes());
      parameter.mutable_grad() = grad_view;
      views_.emplace_back(parameter, grad_view);
      offset += n;
    }
    buffer.set_requires_grad(true);
    buffer.mutable_grad() = grad;
    buffers_.push_back(buffer);
    grads_.push_back(grad);
  }
}

void FlatParameters::ZeroGrad() {
  AdoptGradients();  // put views back where a gradient was replaced, then clear them all
  for (auto& g : grads_) g.zero_();
}

void FlatParameters::AdoptGradients() {
  torch::NoGradGuard no_grad;
  for (auto& [parameter, view] : views_) {
    const torch::Tensor& grad = parameter.grad();
    if (grad.defined() && grad.data_ptr() == view.data_ptr()) continue;
    if (grad.defined()) {
      view.copy_(grad);
    } else {
      view.zero_();
    }
    parameter.mutable_grad() = view;
  }
}

}  // namespace dtrain::clip
