// The transformer's layers on their own: the last block's pooled path against the full block,
// the linear layer as one autograd node against addmm over the rows, and self-attention's fused
// CPU and SDPA paths against the matmul-and-softmax reference (values, gradients, operators).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/model/fused_bias_grad.h"
#include "runtime/model/linear_rows.h"
#include "runtime/model/self_attention.h"
#include "runtime/model/transformer.h"
#include "runtime/train/autocast_scope.h"

namespace dtrain::clip {
namespace {

bool Close(const torch::Tensor& a, const torch::Tensor& b, double tol = 1e-5) {
  return torch::allclose(a, b, tol, tol);
}

TEST(Transformer, PooledLastBlockEqualsFullBlockAtThoseRows) {
  torch::manual_seed(1);
  ResidualAttentionBlock block(16, 4, 4.0);
  auto x = torch::randn({3, 7, 16});
  auto rows = torch::tensor({0, 6, 3}, torch::kLong);
  auto arange = torch::arange(3, torch::kLong);
  auto full = block->forward(x, torch::Tensor()).index({arange, rows});
  EXPECT_TRUE(Close(block->ForwardRows(x, rows, false), full));
  auto causal = torch::full({7, 7}, -INFINITY).triu_(1);
  auto full_causal = block->forward(x, causal).index({arange, rows});
  EXPECT_TRUE(Close(block->ForwardRows(x, rows, true), full_causal));
}

// LinearRows is one autograd node whose value and gradients are those of addmm over the rows
// with its views (what it replaced), bit for bit: in float32, under bfloat16 autocast, for a
// non-contiguous input and for row slices of a weight; its output can be modified in place.
TEST(LinearRows, OneNodeWithTheValuesAndGradientsOfAddmmOverTheRows) {
  for (const bool bf16 : {false, true}) {
    for (const bool strided : {false, true}) {
      torch::manual_seed(4);
      auto base = torch::randn({5, 3, 8});
      auto weight_all = torch::randn({12, 8}, torch::requires_grad());
      auto bias_all = torch::randn({12}, torch::requires_grad());
      const auto upstream = torch::randn({3, 5, 6});
      struct Result {
        torch::Tensor value, grad_x, grad_weight, grad_bias;
        std::string node;
      };
      auto run = [&](bool fused) {
        for (auto* t : {&weight_all, &bias_all}) t->mutable_grad() = torch::Tensor();
        auto x = (strided ? base.transpose(0, 1) : base.transpose(0, 1).contiguous())
                     .detach()
                     .requires_grad_(true);
        auto weight = weight_all.narrow(0, 6, 6), bias = bias_all.narrow(0, 6, 6);
        torch::Tensor y;
        {
          AutocastScope autocast(bf16, torch::kCPU);
          y = fused ? LinearRows(x, weight, bias)
                    : torch::addmm(bias, x.reshape({-1, 8}), weight.t()).view({3, 5, 6});
        }
        Result r{y.detach().clone(), {}, {}, {}, y.grad_fn()->name()};
        (y.to(torch::kFloat) * upstream).sum().backward();
        r.grad_x = x.grad();
        r.grad_weight = weight_all.grad();
        r.grad_bias = bias_all.grad();
        return r;
      };
      const Result fused = run(true), reference = run(false);
      const std::string what = std::string(bf16 ? "bf16" : "fp32") + (strided ? " strided" : "");
      EXPECT_NE(fused.node.find("LinearRowsFunction"), std::string::npos) << fused.node;
      EXPECT_EQ(fused.value.scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat) << what;
      EXPECT_TRUE(torch::equal(fused.value, reference.value)) << what;
      EXPECT_TRUE(torch::equal(fused.grad_x, reference.grad_x)) << what;
      EXPECT_TRUE(torch::equal(fused.grad_weight, reference.grad_weight)) << what;
      EXPECT_TRUE(torch::equal(fused.grad_bias, reference.grad_bias)) << what;
      EXPECT_EQ(fused.grad_weight.narrow(0, 0, 6).abs().sum().item<float>(), 0.0f);
    }
  }
  // One node: its edges lead to the three inputs' accumulators, no view or transpose between.
  auto x = torch::randn({2, 4, 8}, torch::requires_grad());
  auto weight = torch::randn({3, 8}, torch::requires_grad());
  auto bias = torch::randn({3}, torch::requires_grad());
  auto y = LinearRows(x, weight, bias);
  ASSERT_EQ(y.grad_fn()->next_edges().size(), 3u);
  for (const auto& edge : y.grad_fn()->next_edges()) {
    EXPECT_NE(edge.function->name().find("AccumulateGrad"), std::string::npos)
        << edge.function->name();
  }
  y.mul_(2.0);  // the q rows are scaled in place
  y.sum().backward();
  EXPECT_TRUE(torch::equal(bias.grad(), torch::full({3}, 16.0f)));
}

// --fused-bias-grad is cuBLASLt's (dtrain-clip check compares it on a GPU): everywhere else the
// fused product declines, saying why, and LinearRows' gradients stay the sums', bit for bit.
TEST(FusedBiasGrad, DeclinesWhereItDoesNotApplyAndLinearRowsKeepsItsGradients) {
  torch::manual_seed(5);
  torch::Tensor weight_grad, bias_grad;
  std::string why;
  const auto rows = torch::randn({16, 8}).to(torch::kBFloat16);
  const auto grad = torch::randn({16, 24}).to(torch::kBFloat16);
  EXPECT_FALSE(WeightAndBiasGradients(grad, rows, &weight_grad, &bias_grad, &why));
  EXPECT_FALSE(weight_grad.defined() || bias_grad.defined());
  EXPECT_FALSE(why.empty());
  std::map<bool, std::vector<torch::Tensor>> gradients;
  for (const bool on : {false, true}) {
    SetFusedBiasGrad(on);
    EXPECT_EQ(FusedBiasGradEnabled(), on);
    torch::manual_seed(6);
    auto x = torch::randn({4, 5, 8}, torch::requires_grad());
    auto weight = torch::randn({24, 8}, torch::requires_grad());
    auto bias = torch::randn({24}, torch::requires_grad());
    {
      AutocastScope autocast(true, torch::kCPU);
      (LinearRows(x, weight, bias).to(torch::kFloat) * torch::randn({4, 5, 24})).sum().backward();
    }
    gradients[on] = {x.grad(), weight.grad(), bias.grad()};
  }
  SetFusedBiasGrad(false);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(gradients[true][i], gradients[false][i]));
}

// The fused CPU attention against ATen's matmul/softmax formula: outputs and the gradient of qkv
// for one upstream gradient, without a mask and with the causal one.
TEST(SelfAttention, FusedCpuPathEqualsTheReferenceInValueAndGradient) {
  torch::manual_seed(2);
  const int64_t batch = 3, length = 7, heads = 4, width = 16;
  auto qkv = torch::randn({batch, length, 3 * width});
  auto upstream = torch::randn({batch, length, width});
  auto causal = torch::full({length, length}, -INFINITY).triu_(1);
  for (const auto& mask : {torch::Tensor(), causal}) {
    auto fused_in = qkv.clone().requires_grad_(true);
    auto reference_in = qkv.clone().requires_grad_(true);
    auto fused = MultiHeadSelfAttention(fused_in, heads, mask);
    auto reference = MultiHeadSelfAttentionReference(reference_in, heads, mask);
    EXPECT_NE(fused.grad_fn()->name().find("FusedSelfAttention"), std::string::npos)
        << "the CPU float32 path should be the fused one, ran " << fused.grad_fn()->name();
    EXPECT_TRUE(Close(fused, reference));
    (fused * upstream).sum().backward();
    (reference * upstream).sum().backward();
    EXPECT_TRUE(Close(fused_in.grad(), reference_in.grad()));
  }
  // Queries never see later positions under the causal mask.
  auto changed = qkv.clone();
  changed.narrow(1, length - 1, 1).normal_();
  EXPECT_TRUE(Close(MultiHeadSelfAttention(qkv, heads, causal).narrow(1, 0, length - 1),
                    MultiHeadSelfAttention(changed, heads, causal).narrow(1, 0, length - 1)));
}

// The path off the CPU float32 one (GPU, bfloat16): at::scaled_dot_product_attention, checked on
// the CPU against the matmul/softmax reference in value and gradient, with no mask, the causal
// mask read as a mask, and causality applied by the kernel (is_causal).
TEST(SelfAttention, SdpaPathEqualsTheReferenceInValueAndGradient) {
  torch::manual_seed(3);
  const int64_t batch = 3, length = 9, heads = 4, width = 32;
  auto qkv = torch::randn({batch, length, 3 * width});
  auto upstream = torch::randn({batch, length, width});
  auto causal_mask = torch::full({length, length}, -INFINITY).triu_(1);
  struct Case {
    torch::Tensor mask;
    bool causal;
  };
  for (const Case& c :
       {Case{torch::Tensor(), false}, Case{causal_mask, false}, Case{causal_mask, true}}) {
    auto sdpa_in = qkv.clone().requires_grad_(true);
    auto reference_in = qkv.clone().requires_grad_(true);
    auto sdpa = MultiHeadSelfAttentionSdpa(sdpa_in, heads, c.mask, c.causal);
    auto reference = MultiHeadSelfAttentionReference(reference_in, heads, c.mask);
    EXPECT_TRUE(Close(sdpa, reference)) << "causal " << c.causal;
    (sdpa * upstream).sum().backward();
    (reference * upstream).sum().backward();
    EXPECT_TRUE(Close(sdpa_in.grad(), reference_in.grad())) << "causal " << c.causal;
  }
  // bfloat16 is not the fused CPU path's: it goes through SDPA, close to float32's result.
  auto bf16 = MultiHeadSelfAttention(qkv.to(torch::kBFloat16), heads, causal_mask, true);
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(Close(bf16.to(torch::kFloat),
                    MultiHeadSelfAttentionReference(qkv, heads, causal_mask), 3e-2));
}

// The ATen operators run while `body` runs, on any thread (the backward's too).
std::vector<std::string> OperatorsRunBy(const std::function<void()>& body) {
  static std::mutex mutex;
  static std::vector<std::string>* names = nullptr;
  std::vector<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mutex);
    names = &seen;
  }
  auto handle =
      at::addGlobalCallback(at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                                           -> std::unique_ptr<at::ObserverContext> {
                              std::lock_guard<std::mutex> lock(mutex);
                              if (names != nullptr) names->emplace_back(fn.name());
                              return nullptr;
                            }).scopes({at::RecordScope::FUNCTION}));
  body();
  at::removeCallback(handle);
  std::lock_guard<std::mutex> lock(mutex);
  names = nullptr;
  return seen;
}

// The SDPA path's q, k and v: the gradient is exactly unbind's, and the backward writes it with
// one copy per part (index or unbind zero-fill, add or stack, then copy again).
TEST(SelfAttention, QueriesKeysValuesGradientIsWrittenOnceIntoQkvsLayout) {
  torch::manual_seed(4);
  const int64_t batch = 2, length = 5, heads = 4, width = 32;
  auto qkv = torch::randn({batch, length, 3 * width}, torch::kBFloat16);
  std::vector<torch::Tensor> upstream;
  for (int i = 0; i < 3; ++i)
    upstream.push_back(torch::randn({batch, heads, length, width / heads}));
  auto loss = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    return (q.to(torch::kFloat) * upstream[0]).sum() + (k.to(torch::kFloat) * upstream[1]).sum() +
           (v.to(torch::kFloat) * upstream[2]).sum();
  };
  auto ours_in = qkv.clone().requires_grad_(true);
  auto [q, k, v] = QueriesKeysValues(ours_in, heads);
  auto unbind_in = qkv.clone().requires_grad_(true);
  auto parts =
      unbind_in.view({batch, length, 3, heads, width / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
  EXPECT_TRUE(torch::equal(q, parts[0]) && torch::equal(k, parts[1]) && torch::equal(v, parts[2]));
  EXPECT_EQ(q.data_ptr(), ours_in.data_ptr()) << "q should be a view of qkv";
  auto ours_loss = loss(q, k, v);
  auto unbind_loss = loss(parts[0], parts[1], parts[2]);
  std::vector<std::string> ops = OperatorsRunBy([&] { ours_loss.backward(); });
  std::vector<std::string> unbind_ops = OperatorsRunBy([&] { unbind_loss.backward(); });
  EXPECT_TRUE(torch::equal(ours_in.grad(), unbind_in.grad()));
  EXPECT_TRUE(ours_in.grad().is_contiguous());
  // The operators from the split's backward node on, counted by name.
  auto split_ops = [](const std::vector<std::string>& all, const std::string& node) {
    std::map<std::string, int> count;
    bool in = false;
    for (const auto& name : all) {
      const bool is_node = name.rfind("autograd::engine::evaluate_function: ", 0) == 0;
      if (is_node)
        in = name.find(node) != std::string::npos ||
             (in && name.find("Backward") != std::string::npos);
      if (in && !is_node) ++count[name];
    }
    return count;
  };
  auto ours = split_ops(ops, "QkvHeads");
  EXPECT_EQ(ours["aten::copy_"], 3);
  for (const char* op : {"aten::zero_", "aten::fill_", "aten::add_", "aten::add", "aten::cat",
                         "aten::stack", "aten::clone"}) {
    EXPECT_EQ(ours[op], 0) << op << " ran in the split's backward";
  }
  // unbind's: a stacked copy, then a second copy back into qkv's layout.
  auto unbind = split_ops(unbind_ops, "UnbindBackward");
  EXPECT_EQ(unbind["aten::cat"], 1);
  EXPECT_EQ(unbind["aten::clone"], 1);
  // A part with no gradient is zero in qkv's.
  auto partial_in = qkv.clone().requires_grad_(true);
  auto partial = QueriesKeysValues(partial_in, heads);
  (partial[1].to(torch::kFloat) * upstream[1]).sum().backward();
  auto grad = partial_in.grad().view({batch, length, 3, width});
  EXPECT_EQ(grad.select(2, 0).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(grad.select(2, 2).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(grad.select(2, 1),
                           unbind_in.grad().view({batch, length, 3, width}).select(2, 1)));
}

}  // namespace
}  // namespace dtrain::clip
