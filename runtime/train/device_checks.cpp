#include "runtime/train/device_checks.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "runtime/config/model_config.h"
#include "runtime/model/clip_loss.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/fused_bias_grad.h"
#include "runtime/model/linear_rows.h"
#include "runtime/model/self_attention.h"
#include "runtime/model/vision_tower.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/step_rig.h"

namespace dtrain::clip {
namespace {

namespace profiler = torch::autograd::profiler;

// max |a - b| / max |b|: one number per comparison, whatever the scale of the values.
double RelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  auto x = a.detach().to(torch::kCPU, torch::kDouble),
       y = b.detach().to(torch::kCPU, torch::kDouble);
  const double scale = std::max(y.abs().max().item<double>(), 1e-30);
  return (x - y).abs().max().item<double>() / scale;
}

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

DeviceCheck AttentionCheck(const torch::Device& device, bool causal) {
  torch::manual_seed(1);
  const bool bf16 = device.is_cuda();
  const int64_t batch = 4, length = 50, heads = 8, head_dim = 32, width = heads * head_dim;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto qkv = torch::randn({batch, length, 3 * width}, f32);
  if (bf16) qkv = qkv.to(torch::kBFloat16).to(torch::kFloat);  // the same inputs on both sides
  torch::Tensor mask;
  if (causal)
    mask = torch::full({length, length}, -std::numeric_limits<float>::infinity(), f32).triu(1);
  auto ours_in = (bf16 ? qkv.to(torch::kBFloat16) : qkv.clone()).requires_grad_(true);
  auto ours = MultiHeadSelfAttention(ours_in, heads, mask, causal);
  auto upstream = torch::randn({batch, length, width}, f32);
  (ours.to(torch::kFloat) * upstream).sum().backward();
  auto reference_in = qkv.clone().requires_grad_(true);
  auto reference = MultiHeadSelfAttentionReference(reference_in, heads, mask);
  (reference * upstream).sum().backward();
  const double value = RelativeDifference(ours, reference);
  const double gradient = RelativeDifference(ours_in.grad(), reference_in.grad());
  const double limit = bf16 ? 3e-2 : 1e-4;
  DeviceCheck check{causal ? "attention-causal" : "attention", value <= limit && gradient <= limit,
                    ""};
  check.detail = Format(
      "%s (%s) against matmul and softmax in float32: values %.1e, gradient "
      "%.1e (limit %.0e)",
      bf16 ? "SDPA with QueriesKeysValues" : "the fused CPU kernel", bf16 ? "bfloat16" : "float32",
      value, gradient, limit);
  return check;
}

DeviceCheck PatchEmbeddingCheck(const torch::Device& device) {
  torch::manual_seed(2);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto images = torch::randn({4, 3, 64, 64}, f32);
  auto weight = torch::randn({96, 3, 16, 16}, f32) * 0.05;
  auto matmul_weight = weight.clone().requires_grad_(true);
  auto conv_weight = weight.clone().requires_grad_(true);
  auto ours = PatchEmbeddingAsMatmul(images, matmul_weight);
  auto reference = torch::conv2d(images, conv_weight, {}, 16).flatten(2).transpose(1, 2);
  auto upstream = torch::randn_like(reference);
  (ours * upstream).sum().backward();
  (reference * upstream).sum().backward();
  const double value = RelativeDifference(ours, reference);
  const double gradient = RelativeDifference(matmul_weight.grad(), conv_weight.grad());
  // cuDNN may run a float32 convolution in TF32 (10-bit mantissa): ~1e-3 apart.
  const double limit = device.is_cuda() ? 1e-2 : 1e-4;
  return {"patch-embedding", value <= limit && gradient <= limit,
          Format("one matrix product against the convolution (float32): values %.1e, weight "
                 "gradient %.1e (limit %.0e)",
                 value, gradient, limit)};
}

// LinearRows (one autograd node) against addmm over the rows with its views, under bf16 autocast
// on CUDA (the step's types), float32 on the CPU: the same calls, so bit for bit is expected;
// a kernel that sums in another order would stay inside the limit.
DeviceCheck LinearRowsCheck(const torch::Device& device) {
  torch::manual_seed(3);
  const bool bf16 = device.is_cuda();
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const auto input = torch::randn({64, 50, 256}, f32);
  const auto weight_values = torch::randn({768, 256}, f32) * 0.05;
  const auto bias_values = torch::randn({768}, f32);
  const auto upstream = torch::randn({64, 50, 768}, f32);
  std::vector<torch::Tensor> results[2];
  for (const bool fused : {true, false}) {
    auto x = input.clone().requires_grad_(true);
    auto weight = weight_values.clone().requires_grad_(true);
    auto bias = bias_values.clone().requires_grad_(true);
    torch::Tensor y;
    {
      AutocastScope autocast(bf16, device);
      y = fused ? LinearRows(x, weight, bias)
                : torch::addmm(bias, x.reshape({-1, 256}), weight.t()).view({64, 50, 768});
    }
    (y.to(torch::kFloat) * upstream).sum().backward();
    results[fused ? 0 : 1] = {y.to(torch::kFloat), x.grad(), weight.grad(), bias.grad()};
  }
  bool bit_equal = true;
  double difference = 0;
  for (size_t i = 0; i < 4; ++i) {
    bit_equal = bit_equal && torch::equal(results[0][i], results[1][i]);
    difference = std::max(difference, RelativeDifference(results[0][i], results[1][i]));
  }
  const double limit = bf16 ? 1e-2 : 1e-5;
  return {"linear-rows", difference <= limit,
          Format("one autograd node against addmm over the rows (%s): values and the input's, "
                 "weight's and bias's gradients %s",
                 bf16 ? "bfloat16 autocast" : "float32",
                 bit_equal ? "bit for bit"
                           : Format("%.1e apart (limit %.0e)", difference, limit).c_str())};
}

// --fused-bias-grad: the weight's and bias's gradients of ViT-B/32's linear layers at batch 256
// (the vision tower's 50 positions, the text tower's cut at 16) from one cuBLASLt product with
// the BGRADB epilogue, against grad^T rows and the sum over the rows (bfloat16, as the step's).
// On the CPU the fused product must decline (it is CUDA's): LinearRows then takes the old path.
// Where cuBLASLt declines on CUDA the check passes and says so: the step is right (it sums), and a
// node without an optional fast path is not a faulty one to dtrain doctor --compute.
DeviceCheck FusedBiasGradCheck(const torch::Device& device) {
  torch::manual_seed(4);
  if (!device.is_cuda()) {
    torch::Tensor weight, bias;
    std::string why;
    const auto t = torch::randn({64, 32}).to(torch::kBFloat16);
    const bool taken = WeightAndBiasGradients(t, t, &weight, &bias, &why);
    return {"fused-bias-grad", !taken && !weight.defined(),
            taken ? "the fused product ran on the CPU"
                  : "CUDA only; declined on the CPU (" + why + "): the sum over the rows is used"};
  }
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(device);
  // [M, in] -> [M, out]: the vision block's q/k/v, MLP in and out; the text block's q/k/v.
  const std::array<std::array<int64_t, 3>, 4> shapes = {
      {{256 * 50, 768, 2304}, {256 * 50, 768, 3072}, {256 * 50, 3072, 768}, {256 * 16, 512, 1536}}};
  double worst = 0;
  std::string declined;
  for (const auto& [M, in, out] : shapes) {
    const auto rows = torch::randn({M, in}, bf16), grad = torch::randn({M, out}, bf16) * 0.01;
    torch::Tensor weight, bias;
    std::string why;
    if (!WeightAndBiasGradients(grad, rows, &weight, &bias, &why)) {
      declined = why;
      break;
    }
    worst = std::max({worst, RelativeDifference(weight, grad.t().mm(rows)),
                      RelativeDifference(bias, grad.sum(0))});
  }
  const double limit = 1e-2;
  // Not there (an older cuBLASLt or GPU): the step then takes the sum, as with the flag off.
  if (!declined.empty()) {
    return {"fused-bias-grad", true,
            "not available on this device (" + declined +
                "): --fused-bias-grad takes the sum over the rows, as off"};
  }
  return {"fused-bias-grad", worst <= limit,
          Format("one cuBLASLt product (BGRADB) against grad^T rows and the sum over the rows, "
                 "bfloat16, 4 shapes of ViT-B/32 at batch 256: %.1e apart (limit %.0e)",
                 worst, limit)};
}

// The kernels of `body` on CUDA, by name: how many launches had a name containing each of `names`.
std::vector<int64_t> CudaKernelsRunBy(const std::function<void()>& body,
                                      const std::vector<std::string>& names,
                                      const torch::Device& device) {
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  const ProfilerConfig config(ProfilerState::KINETO);
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  body();
  torch::cuda::synchronize(device.index());
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::vector<int64_t> counts(names.size(), 0);
  for (const auto& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA) continue;
    const std::string name = event.name();
    for (size_t i = 0; i < names.size(); ++i) {
      if (name.find(names[i]) != std::string::npos) ++counts[i];
    }
  }
  return counts;
}

DeviceCheck LayerNormCheck(const torch::Device& device) {
  const StepAlignment a = AlignmentOfAStep(device, FlatLayout::kAligned);
  bool passed = a.calls == a.layer_norm_modules && a.calls_on_parameters == a.calls &&
                a.calls_aligned == a.calls &&
                a.gradients_in_place_and_aligned == a.whole_vector_parameters;
  std::string detail = Format(
      "%lld of %lld LayerNorm calls of a step on the parameters' own 16-byte aligned views, "
      "%lld of %lld gradients aligned in place",
      static_cast<long long>(a.calls_aligned), static_cast<long long>(a.calls),
      static_cast<long long>(a.gradients_in_place_and_aligned),
      static_cast<long long>(a.whole_vector_parameters));
  if (device.is_cuda()) {
    passed = passed && a.vectorised_kernels > 0 && a.slower_kernels == 0;
    detail += Format("; kernels: %lld vectorised, %lld of the slower pair",
                     static_cast<long long>(a.vectorised_kernels),
                     static_cast<long long>(a.slower_kernels));
  }
  return {"layer-norm", passed, detail};
}

// Whether two rigs' parameters are equal bit for bit, and their largest absolute difference.
std::pair<bool, double> CompareParameters(const StepRig& a, const StepRig& b) {
  bool bit_equal = true;
  double difference = 0;
  auto pa = a.model->parameters(), pb = b.model->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    bit_equal = bit_equal && torch::equal(pa[i], pb[i]);
    difference = std::max(difference, (pa[i] - pb[i]).abs().max().to(torch::kCPU).item<double>());
  }
  return {bit_equal, difference};
}

// `lengths`: each step's text length, 0 for the whole context (one graph); cut lengths give a
// graph each, sharing one memory pool, as --cuda-graphs with the cut text runs them.
DeviceCheck CapturedStepCheck(const torch::Device& device, const std::string& name,
                              const std::vector<int64_t>& lengths) {
  const bool cuda = device.is_cuda();
  const bool whole = lengths.front() == 0;
  std::vector<int64_t> distinct = lengths;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  StepRig eager(7, device), replayed(7, device);
  // On CUDA the trainer's default step: bf16 with the matrix weights' copies.
  auto eager_step = eager.Step(/*bf16=*/cuda, whole, /*weight_copies=*/true);
  CapturedStep captured(replayed.Step(/*bf16=*/cuda, whole, /*weight_copies=*/true),
                        /*capture=*/cuda,
                        /*warmup_steps=*/1, static_cast<int>(distinct.size()));
  const double lr = 1e-3;
  const int steps = static_cast<int>(lengths.size());
  double loss_difference = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<torch::Tensor> batch = TinyStepInputs(8, 100 + step, lr, device);
    if (!whole) batch[1] = batch[1].narrow(1, 0, lengths[step]).contiguous();
    const torch::Tensor expected = eager_step(batch).at(0).clone();
    const torch::Tensor loss = captured.Run(batch).at(0).clone();
    loss_difference = std::max(loss_difference, RelativeDifference(loss, expected));
  }
  const auto [bit_equal, parameter_difference] = CompareParameters(eager, replayed);
  // AdamW moves a parameter by about lr a step at most: a replay on stale or wrong inputs gives
  // another loss; kernels that differ only in summation order stay far inside this.
  const double loss_limit = cuda ? 1e-2 : 0, parameter_limit = cuda ? 2 * lr * steps : 0;
  // One warm-up for the first shape, and on CUDA one for each later shape.
  const int64_t warmups = 1 + (cuda ? static_cast<int64_t>(distinct.size()) - 1 : 0);
  const bool passed = captured.replays() == steps - warmups && captured.captured() == cuda &&
                      captured.shapes() == static_cast<int64_t>(distinct.size()) &&
                      loss_difference <= loss_limit && parameter_difference <= parameter_limit;
  std::string detail = Format("%d steps, ", steps);
  if (whole) {
    detail += cuda ? "captured as a CUDA graph and replayed: " : "replayed from static buffers: ";
  } else {
    detail += "text lengths";
    for (size_t i = 0; i < distinct.size(); ++i) {
      detail += Format("%s %lld", i == 0 ? "" : (i + 1 == distinct.size() ? " and" : ","),
                       static_cast<long long>(distinct[i]));
    }
    detail += cuda
                  ? " in turn, a CUDA graph each in one memory pool: "
                  : Format(" in turn, replayed from %zu sets of static buffers: ", distinct.size());
  }
  if (cuda) {
    detail += Format("losses %.1e apart (limit %.0e), parameters ", loss_difference, loss_limit) +
              (bit_equal ? std::string("bit for bit")
                         : Format("max |difference| %.1e (limit %.0e)", parameter_difference,
                                  parameter_limit));
  } else {
    detail += bit_equal && loss_difference == 0
                  ? std::string("losses and parameters bit for bit, as required on the CPU")
                  : Format(
                        "losses %.1e apart, parameters max |difference| %.1e: they must be "
                        "equal on the CPU",
                        loss_difference, parameter_difference);
  }
  detail += Format("; %lld replays", static_cast<long long>(captured.replays()));
  return {name, passed, detail};
}

}  // namespace

// Three steps of the captured step's function run eagerly under bf16 autocast: with the matrix
// weights' bfloat16 copies (--weight-copies, the default) against autocast's cast of each at its
// use, from the same weights and batches. The same numbers by construction: bit for bit on the
// CPU; on CUDA within the captured step's limits, in case a kernel sums in another order.
DeviceCheck WeightCopiesCheck(const torch::Device& device) {
  const bool cuda = device.is_cuda();
  StepRig cast(7, device), copied(7, device);
  auto cast_step = cast.Step(/*bf16=*/true, /*whole_text=*/true, /*weight_copies=*/false);
  auto copied_step = copied.Step(/*bf16=*/true, /*whole_text=*/true, /*weight_copies=*/true);
  const double lr = 1e-3;
  const int steps = 3;
  double loss_difference = 0;
  for (int step = 0; step < steps; ++step) {
    const std::vector<torch::Tensor> batch = TinyStepInputs(8, 200 + step, lr, device);
    const torch::Tensor expected = cast_step(batch).at(0).clone();
    const torch::Tensor loss = copied_step(batch).at(0).clone();
    loss_difference = std::max(loss_difference, RelativeDifference(loss, expected));
  }
  const auto [bit_equal, parameter_difference] = CompareParameters(cast, copied);
  const double loss_limit = cuda ? 1e-2 : 0, parameter_limit = cuda ? 2 * lr * steps : 0;
  const bool passed = copied.copies && copied.copies->size() > 0 && loss_difference <= loss_limit &&
                      parameter_difference <= parameter_limit;
  std::string detail = Format(
      "%d bf16 steps, %zu matrix weights from their bfloat16 copies against autocast's "
      "casts: ",
      steps, copied.copies ? copied.copies->size() : size_t{0});
  if (bit_equal && loss_difference == 0) {
    detail += "losses and parameters bit for bit";
  } else {
    detail += Format(
        "losses %.1e apart (limit %.0e), parameters max |difference| %.1e (limit "
        "%.0e)",
        loss_difference, loss_limit, parameter_difference, parameter_limit);
  }
  return {"weight-copies", passed, detail};
}

StepAlignment AlignmentOfAStep(const torch::Device& device, FlatLayout layout) {
  torch::manual_seed(0);
  ClipModel model(PresetModelConfig("fmnist-tiny"));
  model->to(device);
  FlatParameters flat(WeightDecayGroups(*model), layout);
  StepAlignment a;
  std::set<const void*> layer_norm_vectors;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name.find("ln_") == std::string::npos) continue;
    layer_norm_vectors.insert(item.value().data_ptr());
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) ++a.layer_norm_modules;
  }
  // One observer at a time: the calls go to the vector of the step being watched.
  static std::mutex mutex;
  static std::vector<std::array<uintptr_t, 4>>* calls = nullptr;  // input, weight, bias, row
  std::vector<std::array<uintptr_t, 4>> seen;
  {
    std::lock_guard<std::mutex> lock(mutex);
    calls = &seen;
  }
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            if (std::string(fn.name()) != "aten::native_layer_norm") return nullptr;
            auto in = fn.inputs();  // input, normalized_shape, weight, bias, eps
            auto pointer = [&](size_t i) {
              return in[i].isTensor() ? reinterpret_cast<uintptr_t>(in[i].toTensor().data_ptr())
                                      : uintptr_t{1};
            };
            int64_t row = 1;
            for (int64_t d : in[1].toDimVector()) row *= d;
            std::lock_guard<std::mutex> lock(mutex);
            if (calls != nullptr)
              calls->push_back({pointer(0), pointer(2), pointer(3), static_cast<uintptr_t>(row)});
            return nullptr;
          })
          .needsInputs(true)
          .scopes({at::RecordScope::FUNCTION}));
  auto step = [&] {
    const std::vector<torch::Tensor> inputs = TinyStepInputs(3, 5, 0, device);
    const torch::Tensor &images = inputs[0], &tokens = inputs[1];
    torch::Tensor loss;
    {
      AutocastScope autocast(device.is_cuda(), device);  // the CUDA step runs under bf16 autocast
      ClipOutput out = model(images, tokens);
      loss = ContrastiveLoss(out.image_features, out.text_features, out.logit_scale);
    }
    loss.backward();
  };
  if (device.is_cuda()) {
    const auto kernels = CudaKernelsRunBy(
        step,
        {"vectorized_layer_norm_kernel", "RowwiseMomentsCUDAKernel", "LayerNormForwardCUDAKernel"},
        device);
    a.vectorised_kernels = kernels[0];
    a.slower_kernels = kernels[1] + kernels[2];
  } else {
    step();
  }
  at::removeCallback(handle);
  {
    std::lock_guard<std::mutex> lock(mutex);
    calls = nullptr;
  }
  for (const auto& [input, weight, bias, row] : seen) {
    ++a.calls;
    if (layer_norm_vectors.count(reinterpret_cast<const void*>(weight)) &&
        layer_norm_vectors.count(reinterpret_cast<const void*>(bias)))
      ++a.calls_on_parameters;
    if (input % 16 == 0 && weight % 16 == 0 && bias % 16 == 0 && row % 4 == 0) ++a.calls_aligned;
  }
  // A gradient still inside a flat gradient buffer: AccumulateGrad added into its view.
  auto in_flat_gradient = [&](const char* at) {
    for (const auto& buffer : flat.buffers()) {
      const char* base = static_cast<const char*>(buffer.grad().data_ptr());
      if (at >= base && at < base + buffer.numel() * buffer.element_size()) return true;
    }
    return false;
  };
  for (const auto& p : model->parameters()) {
    if (p.numel() % 4 != 0) continue;
    ++a.whole_vector_parameters;
    const char* at = static_cast<const char*>(p.grad().data_ptr());
    if (in_flat_gradient(at) && reinterpret_cast<uintptr_t>(at) % 16 == 0)
      ++a.gradients_in_place_and_aligned;
  }
  return a;
}

std::vector<DeviceCheck> RunDeviceChecks(const torch::Device& device) {
  const std::vector<std::pair<const char*, std::function<DeviceCheck()>>> checks = {
      {"attention", [&] { return AttentionCheck(device, false); }},
      {"attention-causal", [&] { return AttentionCheck(device, true); }},
      {"patch-embedding", [&] { return PatchEmbeddingCheck(device); }},
      {"linear-rows", [&] { return LinearRowsCheck(device); }},
      {"fused-bias-grad", [&] { return FusedBiasGradCheck(device); }},
      {"layer-norm", [&] { return LayerNormCheck(device); }},
      {"weight-copies", [&] { return WeightCopiesCheck(device); }},
      {"captured-step",
       [&] {
         return CapturedStepCheck(device, "captured-step", {0, 0, 0});
       }},
      {"captured-lengths",
       [&] {
         return CapturedStepCheck(device, "captured-lengths", {16, 24, 16, 24, 16});
       }},
  };
  std::vector<DeviceCheck> results;
  for (const auto& [name, run] : checks) {
    try {
      results.push_back(run());
    } catch (const std::exception& e) {
      results.push_back({name, false, std::string("error: ") + e.what()});
    }
  }
  return results;
}

std::string DeviceModel(const torch::Device& device) {
#ifdef DTRAIN_HAVE_CUDA
  if (!device.is_cuda()) return "";
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device.has_index() ? device.index() : 0) !=
      cudaSuccess) {
    cudaGetLastError();  // clear it: the checks that follow report the device's state themselves
    return "";
  }
  return properties.name;
#else
  (void)device;
  return "";
#endif
}

}  // namespace dtrain::clip
