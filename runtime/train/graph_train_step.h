// The training step a CapturedStep runs for --cuda-graphs: inputs {images, tokens, lr} ->
// outputs {loss}. Zeroing the flat gradients, forward (bf16 autocast when asked), the loss,
// backward and the fused AdamW step, all on tensors that keep their storage from step to step,
// with no host read inside: what a CUDA graph can hold. With more than one rank the gradients
// are averaged by the collectives' static gradient sync (UseStaticGradientSync). One
// micro-batch; the same step runs eagerly on the CPU. Whether a run may take this path at all:
// cuda_graphs_choice.h.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "runtime/dist/train_collectives.h"
#include "runtime/model/clip_model.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/fused_adamw.h"

namespace dtrain::clip {

// The references must outlive the returned function. The model's text tower takes the whole
// context (`whole_text`) or the tokens as the caller cut them (the trainer: to a
// TextLengthBucket, one graph per length); either way with no host read of the longest caption.
CapturedStep::StepFunction MakeGraphTrainStep(ClipModel model, FlatParameters& flat,
                                              FusedAdamW& optimizer, TrainCollectives& collectives,
                                              bool bf16, bool whole_text = true);

}  // namespace dtrain::clip
