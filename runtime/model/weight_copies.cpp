#include "runtime/model/weight_copies.h"

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

WeightCopies::Scope::Scope(WeightCopies& copies) {
  if (open_scope != nullptr) throw std::logic_error("weight copies: a scope is already open");
  {
    torch::NoGradGuard no_grad;
    if (!copies.copies_.empty()) torch::_foreach_copy_(copies.copies_, copies.parameters_);
  }
  open_scope = &copies;
}

WeightCopies::Scope::~Scope() {
  open_scope = nullptr;
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
