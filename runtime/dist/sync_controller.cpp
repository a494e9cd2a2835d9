#include "runtime/dist/sync_controller.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace dtrain::clip {

// Which gradient starts where another ends, in the same storage: a chain of such gradients is
// reduced as one view. Every rank must cut the same buckets, so a link counts only if all ranks
// have it (two small allreduces: the successors, then whether anyone differs from the sum).
std::vector<std::vector<size_t>> SyncController::AgreeOnChains(
    const std::vector<torch::Tensor>& params) {
  const int64_t n = static_cast<int64_t>(params.size());
  std::vector<std::vector<size_t>> chains;
  if (n == 0) return chains;
  struct Place {
    const void* storage;
    const char* begin;
    size_t index;
  };
  std::vector<Place> places;
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& grad = params[i].grad();
    if (!grad.defined() || !grad.is_contiguous() || grad.numel() == 0) continue;
    places.push_back(
        {grad.storage().unsafeGetStorageImpl(), static_cast<const char*>(grad.data_ptr()), i});
  }
  std::sort(places.begin(), places.end(), [](const Place& a, const Place& b) {
    return a.storage != b.storage ? std::less<const void*>()(a.storage, b.storage)
                                  : a.begin < b.begin;
  });
  torch::Tensor next = torch::full({n}, -1, torch::kInt64);  // successor index, -1 = none
  for (size_t k = 0; k + 1 < places.size(); ++k) {
    const torch::Tensor& here = params[places[k].index];
    const torch::Tensor& there = params[places[k + 1].index];
    if (places[k].storage == places[k + 1].storage &&
        places[k].begin + here.numel() * here.element_size() == places[k + 1].begin &&
        here.scalar_type() == there.scalar_type()) {
      next[static_cast<int64_t>(places[k].index)] = static_cast<int64_t>(places[k + 1].index);
    }
  }
  torch::Tensor sum = next.clone();
  AllreduceControl(sum);
  torch::Tensor differs = (sum != next * comm_.size()).to(torch::kInt32);
  AllreduceControl(differs);
  const int64_t* successor = next.data_ptr<int64_t>();
  const int32_t* disagreed = differs.data_ptr<int32_t>();
  std::vector<bool> has_predecessor(params.size(), false);
  for (int64_t i = 0; i < n; ++i) {
    if (successor[i] >= 0 && disagreed[i] == 0) has_predecessor[successor[i]] = true;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (has_predecessor[i]) continue;
    std::vector<size_t> chain{static_cast<size_t>(i)};
    for (int64_t j = i; successor[j] >= 0 && disagreed[j] == 0; j = successor[j]) {
      chain.push_back(static_cast<size_t>(successor[j]));
    }
    if (chain.size() > 1) chains.push_back(std::move(chain));
  }
  return chains;
}

std::vector<size_t> SyncController::AgreeOnReady(const std::vector<bool>& ready_here,
                                                 bool stop_here, bool& stop) {
  const size_t n = ready_here.size();
  torch::Tensor mask = torch::zeros({static_cast<int64_t>(n + 1)}, torch::kInt32);
  int32_t* bits = mask.data_ptr<int32_t>();
  for (size_t i = 0; i < n; ++i) bits[i] = ready_here[i] ? 1 : 0;
  bits[n] = stop_here ? 1 : 0;
  AllreduceControl(mask);
  const int32_t everyone = comm_.size();
  stop = bits[n] == everyone;
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (bits[i] == everyone) ready.push_back(i);
  }
  return ready;
}

void SyncController::AllreduceControl(torch::Tensor& values) {
  if (control_device_.is_cpu()) {
    comm_.AllreduceSum(values);
    return;
  }
  torch::Tensor on_device = values.to(control_device_);
  comm_.AllreduceSum(on_device);
  values.copy_(on_device);
}

}  // namespace dtrain::clip
