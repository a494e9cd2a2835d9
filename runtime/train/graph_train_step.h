// The training step a CapturedStep runs for --cuda-graphs: inputs {images, tokens, lr} ->
// outputs {loss}. Zeroing the flat gradients (unsetting them, with weight copies), forward (bf16
// autocast when asked, with the matrix weights' bfloat16 copies when given), the loss,
// backward, the gradients gathered into the flat buffers and the fused AdamW step, all on tensors
// that keep their storage from step to step, with no host read inside: what a CUDA graph can hold.
// With more than one rank the gradients are averaged by the collectives' static gradient sync
// (UseStaticGradientSync). One micro-batch; the same step runs eagerly on the CPU. Whether a run
// may take this path at all: cuda_graphs_choice.h.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "runtime/dist/train_collectives.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/weight_copies.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/fused_adamw.h"

namespace dtrain::clip {

// The references must outlive the returned function. The model's text tower takes the whole
// context (`whole_text`) or the tokens as the caller cut them (the trainer: to a
// TextLengthBucket, one graph per length); either way with no host read of the longest caption.
// `copies` (bf16 only; may be null): the bfloat16 copies of MatrixWeights(model) the forward
// pass uses, refreshed inside the step, their gradients handed over before the gather.
CapturedStep::StepFunction MakeGraphTrainStep(ClipModel model, FlatParameters& flat,
                                              FusedAdamW& optimizer, TrainCollectives& collectives,
                                              bool bf16, bool whole_text = true,
                                              WeightCopies* copies = nullptr);

}  // namespace dtrain::clip
