#include "runtime/model/self_attention.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>

// The Fortran BLAS that LibTorch itself calls for float32 matmul. Weak: where the LibTorch in use
// does not export one (a statically linked MKL), attention falls back to ATen's matmul.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc)
    __attribute__((weak));

namespace dtrain::clip {
namespace {

// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, leading dimensions in
// elements. Column-major BLAS computes the transpose: C^T = op(B)^T op(A)^T.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  sgemm_(trans_b ? "T" : "N", trans_a ? "T" : "N", &ni, &mi, &ki, &alpha, b, &lb, a, &la, &beta, c,
         &lc);
}

// The shape of one call: B samples of L positions, H heads of D columns, W = H * D.
struct AttentionShape {
  int64_t batch, length, heads, head_dim, width;
  float scale;  // 1 / sqrt(D)

  explicit AttentionShape(const torch::Tensor& qkv, int64_t heads_)
      : batch(qkv.size(0)),
        length(qkv.size(1)),
        heads(heads_),
        head_dim(qkv.size(2) / 3 / heads_),
        width(qkv.size(2) / 3),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(qkv.size(2) / 3 / heads_)))) {}
  int64_t blocks() const { return batch * heads; }
  // Offset of block i's first query column in qkv (keys at + width, values at + 2 * width).
  int64_t qkv_offset(int64_t i) const {
    return (i / heads) * length * 3 * width + (i % heads) * head_dim;
  }
  // Offset of block i's first column in a [B, L, W] tensor.
  int64_t out_offset(int64_t i) const {
    return (i / heads) * length * width + (i % heads) * head_dim;
  }
};

// Forward: scores in place into probabilities, saved with qkv for the backward pass. `mask` is
// an additive [L, L] mask or an empty tensor (autograd functions take no undefined inputs).
class FusedSelfAttention : public torch::autograd::Function<FusedSelfAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& qkv,
                               int64_t heads, const torch::Tensor& mask) {
    const AttentionShape s(qkv, heads);
    const int64_t l = s.length, d = s.head_dim, w = s.width;
    auto probs = torch::empty({s.blocks(), l, l}, qkv.options());
    auto out = torch::empty({s.batch, l, w}, qkv.options());
    const float* in = qkv.data_ptr<float>();
    const float* mask_data = mask.numel() > 0 ? mask.data_ptr<float>() : nullptr;
    float* p = probs.data_ptr<float>();
    at::parallel_for(0, s.blocks(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* q = in + s.qkv_offset(i);
        float* scores = p + i * l * l;
        if (mask_data) std::memcpy(scores, mask_data, sizeof(float) * l * l);
        Gemm(false, true, l, l, d, s.scale, q, 3 * w, q + w, 3 * w, mask_data ? 1.0f : 0.0f, scores,
             l);
      }
    });
    at::_softmax_out(probs, probs, -1, false);
    float* o = out.data_ptr<float>();
    at::parallel_for(0, s.blocks(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        Gemm(false, false, l, d, l, 1.0f, p + i * l * l, l, in + s.qkv_offset(i) + 2 * w, 3 * w,
             0.0f, o + s.out_offset(i), w);
      }
    });
    ctx->saved_data["heads"] = heads;
    ctx->save_for_backward({qkv, probs});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& qkv = saved[0];
    const torch::Tensor& probs = saved[1];
    const AttentionShape s(qkv, ctx->saved_data["heads"].toInt());
    const int64_t l = s.length, d = s.head_dim, w = s.width;
    auto grad_out = grads[0].contiguous();
    auto grad_qkv = torch::empty_like(qkv);
    auto grad_scores = torch::empty_like(probs);
    const float* in = qkv.data_ptr<float>();
    const float* p = probs.data_ptr<float>();
    const float* go = grad_out.data_ptr<float>();
    float* gi = grad_qkv.data_ptr<float>();
    float* gs = grad_scores.data_ptr<float>();
    at::parallel_for(0, s.blocks(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* v = in + s.qkv_offset(i) + 2 * w;
        const float* dout = go + s.out_offset(i);
        // dV = P^T dO; dP = dO V^T.
        Gemm(true, false, l, d, l, 1.0f, p + i * l * l, l, dout, w, 0.0f,
             gi + s.qkv_offset(i) + 2 * w, 3 * w);
        Gemm(false, true, l, l, d, 1.0f, dout, w, v, 3 * w, 0.0f, gs + i * l * l, l);
      }
    });
    // dS = P * (dP - rowsum(dP * P)), in place.
    at::_softmax_backward_data_out(grad_scores, grad_scores, probs, -1, torch::kFloat);
    at::parallel_for(0, s.blocks(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* q = in + s.qkv_offset(i);
        const float* ds = gs + i * l * l;
        float* dq = gi + s.qkv_offset(i);
        // dQ = scale dS K; dK = scale dS^T Q.
        Gemm(false, false, l, d, l, s.scale, ds, l, q + w, 3 * w, 0.0f, dq, 3 * w);
        Gemm(true, false, l, d, l, s.scale, ds, l, q, 3 * w, 0.0f, dq + w, 3 * w);
      }
    });
    return {grad_qkv, torch::Tensor(), torch::Tensor()};
  }
};

bool FusedPathApplies(const torch::Tensor& qkv, const torch::Tensor& mask) {
  if (sgemm_ == nullptr || !qkv.device().is_cpu() || qkv.scalar_type() != torch::kFloat ||
      !qkv.is_contiguous() || qkv.dim() != 3) {
    return false;
  }
  if (!mask.defined()) return true;
  return mask.device().is_cpu() && mask.scalar_type() == torch::kFloat && mask.is_contiguous() &&
         mask.dim() == 2 && mask.size(0) == qkv.size(1) && mask.size(1) == qkv.size(1);
}

// q, k and v as views of qkv, as unbind would give them, with a backward that writes their three
// gradients straight into one [B, L, 3W] tensor: one strided copy each. Taking them by index or
// unbind instead costs, per layer, a zero-filled [3, B, H, L, D] per part and two additions (index)
// or a stacked copy then a second copy back into qkv's layout (unbind).
struct QkvHeads : public torch::autograd::Function<QkvHeads> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& qkv, int64_t heads) {
    const int64_t batch = qkv.size(0), length = qkv.size(1), width = qkv.size(2) / 3;
    ctx->set_materialize_grads(false);  // an unused part is zeroed here, not filled then copied
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["sizes"] = qkv.sizes();
    auto parts = qkv.view({batch, length, 3, heads, width / heads}).permute({2, 0, 3, 1, 4});
    return {parts[0], parts[1], parts[2]};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const torch::Tensor* any = nullptr;
    for (const auto& g : grads) {
      if (g.defined()) any = &g;
    }
    if (any == nullptr) return {torch::Tensor(), torch::Tensor()};
    const int64_t batch = sizes[0], length = sizes[1], width = sizes[2] / 3;
    auto grad = torch::empty({batch, length, 3, heads, width / heads}, any->options());
    for (int64_t i = 0; i < 3; ++i) {
      auto part = grad.select(2, i);  // [B, L, H, D]
      if (grads[i].defined()) {
        part.copy_(grads[i].transpose(1, 2));
      } else {
        part.zero_();
      }
    }
    return {grad.view(sizes), torch::Tensor()};
  }
};

}  // namespace

std::array<torch::Tensor, 3> QueriesKeysValues(const torch::Tensor& qkv, int64_t heads) {
  auto parts = QkvHeads::apply(qkv, heads);
  return {parts[0], parts[1], parts[2]};
}

torch::Tensor MultiHeadSelfAttentionReference(const torch::Tensor& qkv, int64_t heads,
                                              const torch::Tensor& mask) {
  const int64_t batch = qkv.size(0), length = qkv.size(1), width = qkv.size(2) / 3;
  const int64_t head_dim = width / heads;
  // [B, L, 3W] -> three [B, H, L, D] views.
  auto parts = qkv.view({batch, length, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  auto q = parts[0], k = parts[1], v = parts[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  auto scores = torch::matmul(q, k.transpose(-2, -1)).mul_(scale);
  if (mask.defined()) scores.add_(mask);
  auto weights = torch::softmax(scores, -1);
  return torch::matmul(weights, v).transpose(1, 2).reshape({batch, length, width});
}

torch::Tensor MultiHeadSelfAttentionSdpa(const torch::Tensor& qkv, int64_t heads,
                                         const torch::Tensor& mask, bool causal) {
  const int64_t batch = qkv.size(0), length = qkv.size(1), width = qkv.size(2) / 3;
  // Three [B, H, L, D] views; their last dimension stays contiguous, as the fused kernels need.
  auto [q, k, v] = QueriesKeysValues(qkv, heads);
  std::optional<torch::Tensor> attn_mask;
  if (mask.defined() && !causal) attn_mask = mask.to(qkv.scalar_type());
  auto out = at::scaled_dot_product_attention(q, k, v, attn_mask, 0.0, causal && mask.defined());
  return out.transpose(1, 2).reshape({batch, length, width});
}

torch::Tensor MultiHeadSelfAttention(const torch::Tensor& qkv, int64_t heads,
                                     const torch::Tensor& mask, bool causal) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0,
              "self-attention expects qkv [B, L, 3 * heads * head_dim], got ", qkv.sizes(),
              " with ", heads, " heads");
  if (!FusedPathApplies(qkv, mask)) return MultiHeadSelfAttentionSdpa(qkv, heads, mask, causal);
  return FusedSelfAttention::apply(qkv, heads, mask.defined() ? mask : torch::empty({0}));
}

}  // namespace dtrain::clip
