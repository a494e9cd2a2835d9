#include "runtime/model/fused_bias_grad.h"

#include <atomic>

#ifdef DTRAIN_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#endif

namespace dtrain::clip {
namespace {

std::atomic<bool> fused_bias_grad{false};

#ifdef DTRAIN_HAVE_CUDA
// cuBLASLt's functions from the library LibTorch loaded (libtorch_cuda needs it).
struct LtApi {
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  bool found = true;

  template <typename Pointer>
  void Find(Pointer& pointer, const char* name) {
    pointer = reinterpret_cast<Pointer>(dlsym(RTLD_DEFAULT, name));
    found = found && pointer != nullptr;
  }
};

const LtApi& Lt() {
  static const LtApi api = [] {
    LtApi a;
    a.Find(a.desc_create, "cublasLtMatmulDescCreate");
    a.Find(a.desc_set, "cublasLtMatmulDescSetAttribute");
    a.Find(a.layout_create, "cublasLtMatrixLayoutCreate");
    a.Find(a.preference_create, "cublasLtMatmulPreferenceCreate");
    a.Find(a.preference_set, "cublasLtMatmulPreferenceSetAttribute");
    a.Find(a.preference_destroy, "cublasLtMatmulPreferenceDestroy");
    a.Find(a.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    a.Find(a.matmul, "cublasLtMatmul");
    return a;
  }();
  return api;
}

// One shape's product: its descriptors and the algorithm cuBLASLt chose, kept for the process
// (a step has a few shapes; the heuristic costs the host more than the launch).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t rows = nullptr, grad = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string why;  // empty: usable
};

// type, M, in, out, rows' and grad's leading dimensions, the four pointers' alignments, the
// device, the workspace's size.
using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t,
                           uint32_t, uint32_t, int, size_t>;

uint32_t Alignment(const void* pointer) {  // the largest power of two up to 256 dividing it
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment) alignment /= 2;
  return alignment;
}

std::string Status(const char* call, cublasStatus_t status) {
  return std::string(call) + " returned cuBLAS status " + std::to_string(static_cast<int>(status));
}

// Column-major, as cuBLASLt sees the row-major tensors: rows is [in x M] (ld rows.stride(0)),
// grad [out x M] (ld grad.stride(0)), the weight gradient [in x out] (ld in). D = rows * grad^T
// (m = in, n = out, k = M); BGRADB sums B = grad^T over k: one value per column of D, per out.
Plan MakePlan(const PlanKey& key, cudaDataType_t type, void* bias_grad) {
  const LtApi& lt = Lt();
  const auto [dtype, M, in, out, rows_ld, grad_ld, align_rows, align_grad, align_out, align_bias,
              device, workspace] = key;
  (void)dtype, (void)device;
  Plan plan;
  cublasStatus_t s = lt.desc_create(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s != CUBLAS_STATUS_SUCCESS) return plan.why = Status("cublasLtMatmulDescCreate", s), plan;
  const cublasOperation_t no = CUBLAS_OP_N, transposed = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
  lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no);
  lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transposed, sizeof transposed);
  lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  // The heuristic reads the bias pointer's alignment from its value.
  lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_grad, sizeof bias_grad);
  if ((s = lt.layout_create(&plan.rows, type, in, M, rows_ld)) != CUBLAS_STATUS_SUCCESS ||
      (s = lt.layout_create(&plan.grad, type, out, M, grad_ld)) != CUBLAS_STATUS_SUCCESS ||
      (s = lt.layout_create(&plan.out, type, in, out, in)) != CUBLAS_STATUS_SUCCESS) {
    return plan.why = Status("cublasLtMatrixLayoutCreate", s), plan;
  }
  cublasLtMatmulPreference_t preference = nullptr;
  if ((s = lt.preference_create(&preference)) != CUBLAS_STATUS_SUCCESS) {
    return plan.why = Status("cublasLtMatmulPreferenceCreate", s), plan;
  }
  const uint64_t workspace_bytes = workspace;
  lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                    sizeof workspace_bytes);
  // Unless told, cuBLASLt assumes 256-byte aligned matrices.
  lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_rows,
                    sizeof align_rows);
  lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_grad,
                    sizeof align_grad);
  lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out,
                    sizeof align_out);
  lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out,
                    sizeof align_out);
  (void)align_bias;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  s = lt.heuristic(at::cuda::getCurrentCUDABlasLtHandle(), plan.desc, plan.rows, plan.grad,
                   plan.out, plan.out, preference, 1, &result, &found);
  lt.preference_destroy(preference);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    plan.why = "cuBLASLt offers no algorithm with the BGRADB epilogue for [" + std::to_string(M) +
               " x " + std::to_string(in) + "] and [" + std::to_string(M) + " x " +
               std::to_string(out) + "] (" +
               (s != CUBLAS_STATUS_SUCCESS ? Status("cublasLtMatmulAlgoGetHeuristic", s)
                                           : std::string("no result")) +
               ")";
    return plan;
  }
  plan.algo = result.algo;
  return plan;
}
#endif

}  // namespace

void SetFusedBiasGrad(bool on) {
  fused_bias_grad.store(on);
}
bool FusedBiasGradEnabled() {
  return fused_bias_grad.load(std::memory_order_relaxed);
}

bool WeightAndBiasGradients(const torch::Tensor& grad, const torch::Tensor& rows,
                            torch::Tensor* weight_grad, torch::Tensor* bias_grad,
                            std::string* why) {
  auto decline = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
#ifndef DTRAIN_HAVE_CUDA
  (void)grad, (void)rows, (void)weight_grad, (void)bias_grad;
  return decline("this dtrain-clip was built without CUDA");
#else
  if (!grad.is_cuda() || !rows.is_cuda() || grad.device() != rows.device()) {
    return decline("applies to CUDA tensors only");
  }
  const auto type = grad.scalar_type();
  if (rows.scalar_type() != type || (type != torch::kBFloat16 && type != torch::kHalf)) {
    return decline("applies to bfloat16 or float16 only");
  }
  if (grad.dim() != 2 || rows.dim() != 2 || grad.size(0) != rows.size(0) || grad.size(0) == 0) {
    return decline("needs [M, out] and [M, in] of the same M");
  }
  const int64_t M = grad.size(0), in = rows.size(1), out = grad.size(1);
  if (rows.stride(1) != 1 || grad.stride(1) != 1 || rows.stride(0) < in || grad.stride(0) < out ||
      rows.stride(0) % 8 || grad.stride(0) % 8 || in % 8 || out % 8) {
    return decline("needs rows of 8 elements' multiples, each contiguous");
  }
  const LtApi& lt = Lt();
  if (!lt.found) return decline("cuBLASLt's functions are not loaded in this process");

  const size_t workspace_size = at::cuda::getCUDABlasLtWorkspaceSize();
  auto key_for = [&](uint32_t align_weight, uint32_t align_bias) {
    return PlanKey{static_cast<int>(type),
                   M,
                   in,
                   out,
                   rows.stride(0),
                   grad.stride(0),
                   Alignment(rows.data_ptr()),
                   Alignment(grad.data_ptr()),
                   align_weight,
                   align_bias,
                   grad.device().index(),
                   workspace_size};
  };
  const cudaDataType_t cuda_type = type == torch::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
  static std::mutex mutex;
  static std::map<PlanKey, Plan> plans;
  std::lock_guard<std::mutex> lock(mutex);
  // The caching allocator's blocks are 512-byte aligned, so the outputs about to be made will be
  // at 256: a shape already declined so declines before it allocates them, and the plan found is
  // the one for the outputs unless they came out otherwise.
  const PlanKey expected = key_for(256, 256);
  auto it = plans.find(expected);
  if (it != plans.end() && !it->second.why.empty()) return decline(it->second.why);
  auto weight = torch::empty({out, in}, grad.options());
  auto bias = torch::empty({out}, grad.options());
  const PlanKey key = key_for(Alignment(weight.data_ptr()), Alignment(bias.data_ptr()));
  if (key != expected) it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, MakePlan(key, cuda_type, bias.data_ptr())).first;
  const Plan& plan = it->second;
  if (!plan.why.empty()) return decline(plan.why);
  void* bias_pointer = bias.data_ptr();
  lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer, sizeof bias_pointer);
  const float alpha = 1.0f, beta = 0.0f;
  // The handle first: with it ATen sets up this stream's workspace.
  const cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  void* workspace = nullptr;
  try {
    workspace = at::cuda::getCUDABlasLtWorkspace();
  } catch (const std::exception& e) {
    return decline(std::string("no cuBLASLt workspace for this stream: ") + e.what());
  }
  const cublasStatus_t s = lt.matmul(
      handle, plan.desc, &alpha, rows.data_ptr(), plan.rows, grad.data_ptr(), plan.grad, &beta,
      weight.data_ptr(), plan.out, weight.data_ptr(), plan.out, &plan.algo, workspace,
      workspace_size, at::cuda::getCurrentCUDAStream(grad.device().index()).stream());
  if (s != CUBLAS_STATUS_SUCCESS) return decline(Status("cublasLtMatmul", s));
  *weight_grad = std::move(weight);
  *bias_grad = std::move(bias);
  return true;
#endif
}

}  // namespace dtrain::clip
