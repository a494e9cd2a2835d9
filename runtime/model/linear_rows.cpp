#include "runtime/model/linear_rows.h"

#include <ATen/autocast_mode.h>

#include <vector>

#include "runtime/model/fused_bias_grad.h"
#include "runtime/model/weight_copies.h"

namespace dtrain::clip {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x [..., in], weight [out, in], bias [out], all of one type.
class LinearRowsFunction : public torch::autograd::Function<LinearRowsFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const int64_t in = x.size(-1), out = weight.size(0);
    torch::Tensor rows = x.reshape({-1, in});
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = out;
    // Written into a tensor of the output's shape: the output is no view (a view made inside a
    // custom function may not be modified in place, and the q rows are scaled in place).
    torch::Tensor result = torch::empty(sizes, rows.options());
    torch::Tensor result_rows = result.view({-1, out});
    torch::addmm_out(result_rows, bias, rows, weight.t());
    ctx->save_for_backward({rows, weight});
    ctx->saved_data["sizes"] = x.sizes();
    return result;
  }

  // What AddmmBackward0 (weight.t() is column-major, rows row-major), TBackward0, the two
  // ViewBackward0 and the engine's sum of the broadcast bias compute, in the same calls; with
  // --fused-bias-grad on CUDA, the weight's and the bias's gradients in one cuBLASLt product.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& rows = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor grad = grads[0].reshape({-1, weight.size(0)});
    torch::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      grad_x = grad.mm(weight).view(ctx->saved_data["sizes"].toIntVector());
    }
    const bool both = ctx->needs_input_grad(1) && ctx->needs_input_grad(2);
    if (!(both && FusedBiasGradEnabled() &&
          WeightAndBiasGradients(grad, rows, &grad_weight, &grad_bias))) {
      if (ctx->needs_input_grad(1)) grad_weight = grad.t().mm(rows);
      if (ctx->needs_input_grad(2)) grad_bias = grad.sum(0);
    }
    return {grad_x, grad_weight, grad_bias};
  }
};

}  // namespace

torch::Tensor LinearRows(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias) {
  TORCH_CHECK(bias.defined() && weight.dim() == 2 && x.size(-1) == weight.size(1), "LinearRows: x ",
              x.sizes(), ", weight ", weight.sizes(), ", bias ",
              bias.defined() ? bias.sizes() : c10::IntArrayRef{});
  torch::Tensor input = x, w = UseWeightCopy(weight), b = UseWeightCopy(bias);
  const c10::DeviceType device = x.device().type();
  if (at::autocast::is_autocast_enabled(device)) {
    // addmm is on autocast's lower-precision list: every floating argument cast, as it does.
    const at::ScalarType type = at::autocast::get_autocast_dtype(device);
    input = at::autocast::cached_cast(type, input, device);
    w = at::autocast::cached_cast(type, w, device);
    b = at::autocast::cached_cast(type, b, device);
  }
  return LinearRowsFunction::apply(input, w, b);
}

}  // namespace dtrain::clip
