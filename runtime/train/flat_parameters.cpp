#include "runtime/train/flat_parameters.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtrain::clip {
namespace {

constexpr int64_t kAlignmentBytes = 16;

bool KeepsAlignment(const torch::Tensor& p) {
  return (p.numel() * static_cast<int64_t>(p.element_size())) % kAlignmentBytes == 0;
}

}  // namespace

FlatParameters::FlatParameters(const std::vector<std::vector<torch::Tensor>>& groups,
                               FlatLayout layout)
    : layout_(layout) {
  torch::NoGradGuard no_grad;
  for (const auto& group : groups) {
    std::vector<Place> places(group.size());
    int64_t total = 0;
    for (size_t i = 0; i < group.size(); ++i) {
      places[i].model_offset = total;
      places[i].numel = group[i].numel();
      total += group[i].numel();
    }
    // Buffer offsets: the given order, or the aligned parameters first, then the others.
    int64_t offset = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < group.size(); ++i) {
        const bool first = layout_ == FlatLayout::kModelOrder || KeepsAlignment(group[i]);
        if (first == (pass == 0)) {
          places[i].offset = offset;
          offset += places[i].numel;
        }
      }
    }
    auto options = group.empty() ? torch::TensorOptions().dtype(torch::kFloat)
                                 : group.front().options().requires_grad(false);
    torch::Tensor buffer = torch::empty({total}, options);
    torch::Tensor grad = torch::zeros({total}, options);
    for (size_t i = 0; i < group.size(); ++i) {
      const torch::Tensor& p = group[i];
      torch::Tensor value = buffer.narrow(0, places[i].offset, places[i].numel).view(p.sizes());
      value.copy_(p);
      torch::Tensor parameter = p;  // shares the TensorImpl with the module's parameter
      parameter.set_data(value);
      torch::Tensor grad_view = grad.narrow(0, places[i].offset, places[i].numel).view(p.sizes());
      parameter.mutable_grad() = grad_view;
      views_.emplace_back(parameter, grad_view);
    }
    buffer.set_requires_grad(true);
    buffer.mutable_grad() = grad;
    buffers_.push_back(buffer);
    grads_.push_back(grad);
    places_.push_back(std::move(places));
  }
}

void FlatParameters::ZeroGrad() {
  AdoptGradients();  // put views back where a gradient was replaced, then clear them all
  for (auto& g : grads_) g.zero_();
}

void FlatParameters::ReleaseGradients() {
  // Nothing to keep: AdoptGradients() after backward writes every view.
  for (auto& [parameter, view] : views_) parameter.mutable_grad() = torch::Tensor();
}

void FlatParameters::AdoptGradients() {
  torch::NoGradGuard no_grad;
  // One multi-tensor copy per gradient type: float32, and bfloat16 from WeightCopies (on CUDA
  // the copy converts on its fast path).
  struct Copies {
    at::ScalarType type;
    std::vector<torch::Tensor> into, from;
  };
  std::vector<Copies> copies;
  std::vector<torch::Tensor> zeroed;
  for (auto& [parameter, view] : views_) {
    const torch::Tensor& grad = parameter.grad();
    if (grad.defined() && grad.data_ptr() == view.data_ptr()) continue;
    if (grad.defined() && grad.device() == view.device() && grad.is_floating_point()) {
      auto it = std::find_if(copies.begin(), copies.end(),
                             [&](const Copies& c) { return c.type == grad.scalar_type(); });
      if (it == copies.end()) it = copies.insert(copies.end(), Copies{grad.scalar_type(), {}, {}});
      it->into.push_back(view);
      it->from.push_back(grad);
    } else if (grad.defined()) {
      view.copy_(grad);
    } else {
      zeroed.push_back(view);
    }
    parameter.mutable_grad() = view;
  }
  for (auto& c : copies) torch::_foreach_copy_(c.into, c.from);  // `from` keeps them alive
  if (!zeroed.empty()) torch::_foreach_zero_(zeroed);
}

torch::Tensor FlatParameters::FromModelOrder(size_t group, const torch::Tensor& flat) const {
  const std::vector<Place>& places = places_.at(group);
  if (flat.dim() != 1 || flat.numel() != buffers_.at(group).numel()) {
    throw std::invalid_argument("flat parameters: group " + std::to_string(group) + " holds " +
                                std::to_string(buffers_.at(group).numel()) +
                                " values, the tensor to convert " + std::to_string(flat.numel()));
  }
  bool same = true;
  for (const Place& place : places) same = same && place.offset == place.model_offset;
  if (same) return flat;
  torch::NoGradGuard no_grad;
  torch::Tensor out = torch::empty_like(flat);
  for (const Place& place : places) {
    out.narrow(0, place.offset, place.numel).copy_(flat.narrow(0, place.model_offset, place.numel));
  }
  return out;
}

void FlatParameters::MomentsFromModelOrder(torch::optim::AdamW& optimizer) const {
  for (size_t g = 0; g < buffers_.size(); ++g) {
    auto it = optimizer.state().find(buffers_[g].unsafeGetTensorImpl());
    if (it == optimizer.state().end()) continue;  // no step taken yet
    auto& state = static_cast<torch::optim::AdamWParamState&>(*it->second);
    state.exp_avg(FromModelOrder(g, state.exp_avg()));
    state.exp_avg_sq(FromModelOrder(g, state.exp_avg_sq()));
    if (state.max_exp_avg_sq().defined()) {
      state.max_exp_avg_sq(FromModelOrder(g, state.max_exp_avg_sq()));
    }
  }
}

std::unique_ptr<torch::optim::AdamW> MakeFlatAdamW(const FlatParameters& flat,
                                                   const torch::optim::AdamWOptions& options,
                                                   double weight_decay) {
  if (flat.buffers().size() != 2) {
    throw std::invalid_argument("AdamW over flat parameters: expected the two weight-decay groups, "
                                "got " + std::to_string(flat.buffers().size()));
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t g = 0; g < 2; ++g) {
    groups.emplace_back(std::vector<torch::Tensor>{flat.buffers()[g]},
                        std::make_unique<torch::optim::AdamWOptions>(
                            torch::optim::AdamWOptions(options).weight_decay(g == 0 ? 0.0 : weight_decay)));
  }
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

}  // namespace dtrain::clip
