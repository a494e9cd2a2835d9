#include "runtime/dist/fusion_buffer.h"

#include <algorithm>

namespace dtrain::clip {

bool LieEndToEnd(const std::vector<torch::Tensor>& grads) {
  if (grads.empty()) return false;
  const void* storage = grads.front().storage().unsafeGetStorageImpl();
  const char* end = nullptr;
  for (const torch::Tensor& grad : grads) {
    if (!grad.is_contiguous() || grad.storage().unsafeGetStorageImpl() != storage) return false;
    const char* begin = static_cast<const char*>(grad.data_ptr());
    if (end != nullptr && begin != end) return false;
    end = begin + grad.numel() * grad.element_size();
  }
  return true;
}

torch::Tensor FlatView(const torch::Tensor& first, int64_t numel) {
  return first.detach().as_strided({numel}, {1}, first.storage_offset());
}

torch::Tensor PackIntoFusionBuffer(torch::Tensor& buffer, const std::vector<torch::Tensor>& grads,
                                   int64_t capacity_bytes) {
  const torch::Tensor& first = grads.front();
  int64_t numel = 0;
  for (const torch::Tensor& grad : grads) numel += grad.numel();
  if (!buffer.defined() || buffer.numel() < numel || buffer.scalar_type() != first.scalar_type() ||
      buffer.device() != first.device()) {
    buffer =
        torch::empty({std::max(numel, capacity_bytes / first.element_size())}, first.options());
  }
  torch::Tensor flat = buffer.narrow(0, 0, numel);
  int64_t offset = 0;
  for (const torch::Tensor& grad : grads) {
    flat.narrow(0, offset, grad.numel()).view(grad.sizes()).copy_(grad);
    offset += grad.numel();
  }
  return flat;
}

void UnpackFromFusionBuffer(const torch::Tensor& flat, std::vector<torch::Tensor>& grads,
                            const torch::Tensor& divisor) {
  int64_t offset = 0;
  for (torch::Tensor& grad : grads) {
    torch::Tensor slice = flat.narrow(0, offset, grad.numel()).view(grad.sizes());
    if (!divisor.defined()) {
      grad.copy_(slice);
    } else if (grad.is_contiguous()) {
      torch::Tensor out = grad.view({-1});
      torch::div_out(out, slice.view({-1}), divisor);
    } else {
      grad.copy_(slice.div(divisor));
    }
    offset += grad.numel();
  }
}

}  // namespace dtrain::clip
