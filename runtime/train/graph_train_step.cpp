#include "runtime/train/graph_train_step.h"

#include "runtime/train/autocast_scope.h"

namespace dtrain::clip {

CapturedStep::StepFunction MakeGraphTrainStep(ClipModel model, FlatParameters& flat,
                                              FusedAdamW& optimizer, TrainCollectives& collectives,
                                              bool bf16, bool whole_text, WeightCopies* copies) {
  model->text->set_whole_context(whole_text);
  if (!whole_text) model->text->set_cut_by_caller(true);
  return [model, &flat, &optimizer, &collectives, bf16,
          copies](const std::vector<torch::Tensor>& inputs) mutable -> std::vector<torch::Tensor> {
    const torch::Tensor& images = inputs.at(0);
    const torch::Tensor& tokens = inputs.at(1);
    const torch::Tensor& lr = inputs.at(2);
    // Without copies in place: the gradients stay views of the flat buffers, added into. With
    // them unset: the copies' bfloat16 gradients (and the others) are handed over, and
    // AdoptGradients copies them all into the flat buffers, inside the step (and the graph).
    if (copies) {
      flat.ReleaseGradients();
    } else {
      flat.ZeroGrad();
    }
    torch::Tensor loss;
    {
      AutocastScope autocast(bf16, images.device());
      WeightCopies::Scope scope(copies);
      ClipOutput out = model->forward(images, tokens);
      loss = collectives.Loss(out.image_features, out.text_features, out.logit_scale);
    }
    loss.backward(torch::full_like(loss, collectives.BackwardSeed()));
    if (copies) copies->HandOverGradients();
    // Every gradient into its flat buffer first: the static gradient sync reduces the buffers.
    flat.AdoptGradients();
    collectives.AfterBackward(/*last=*/true);
    optimizer.Step(lr);
    model->ClampLogitScale();
    return {loss.detach()};
  };
}

}  // namespace dtrain::clip
