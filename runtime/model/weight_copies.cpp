#include "runtime/model/weight_copies.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>

namespace dtrain::clip {
namespace {

thread_local const WeightCopies* open_scope = nullptr;

}  // namespace

WeightCopies::WeightCopies(const std::vector<torch::Tensor>& parameters, torch::ScalarType type)
    : parameters_(parameters) {
  copies_.reserve(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const torch::Tensor& p = parameters_[i];
    if (!index_.emplace(p.unsafeGetTensorImpl(), i).second) {
      throw std::invalid_argument("weight copies: a parameter is listed twice");
    }
    // A leaf of its own: its gradient is its own tensor, not a slice of a larger one's.
    copies_.push_back(torch::empty(p.sizes(), p.options().dtype(type)).requires_grad_(true));
  }
}

WeightCopies::Scope::Scope(WeightCopies* copies, bool refresh) {
  if (copies == nullptr) return;
  if (open_scope != nullptr) throw std::logic_error("weight copies: a scope is already open");
  if (refresh && !copies->copies_.empty()) {
    torch::NoGradGuard no_grad;
    torch::_foreach_copy_(copies->copies_, copies->parameters_);
  }
  open_scope = copies;
}

WeightCopies::Scope::~Scope() {
  open_scope = nullptr;
}

WeightCopies::~WeightCopies() {
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
}

void WeightCopies::AddGradientsIntoParameters(std::function<void(const torch::Tensor&)> added) {
  added_ = std::move(added);
  if (!hooks_.empty()) return;
  for (size_t i = 0; i < copies_.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(copies_[i]);
    // A post hook of the accumulator runs once autograd has put this backward's gradient (all
    // of its uses summed) into the copy's .grad.
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              AddIntoParameter(i);
              return outputs;
            }));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

void WeightCopies::AddIntoParameter(size_t i) {
  torch::NoGradGuard no_grad;
  torch::Tensor& copy_grad = copies_[i].mutable_grad();
  if (!copy_grad.defined()) return;
  torch::Tensor& grad = parameters_[i].mutable_grad();
  if (grad.defined()) {
    grad.add_(copy_grad);  // in float32: the sum autocast's widened gradient would make
  } else {
    grad = copy_grad.to(parameters_[i].scalar_type());
  }
  copy_grad = torch::Tensor();
  if (added_) added_(parameters_[i]);
}

void WeightCopies::HandOverGradients() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < copies_.size(); ++i) {
    torch::Tensor& copy_grad = copies_[i].mutable_grad();
    if (!copy_grad.defined()) continue;
    torch::Tensor& grad = parameters_[i].mutable_grad();
    grad = grad.defined() ? grad + copy_grad : copy_grad;
    copy_grad = torch::Tensor();
  }
}

torch::Tensor WeightCopies::CopyOf(const torch::Tensor& parameter) const {
  auto it = index_.find(parameter.unsafeGetTensorImpl());
  return it == index_.end() ? torch::Tensor() : copies_[it->second];
}

const torch::Tensor& UseWeightCopy(const torch::Tensor& parameter) {
  if (open_scope == nullptr) return parameter;
  auto it = open_scope->index_.find(parameter.unsafeGetTensorImpl());
  return it == open_scope->index_.end() ? parameter : open_scope->copies_[it->second];
}

}  // namespace dtrain::clip
