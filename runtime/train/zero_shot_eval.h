// ZeroShotEval: OpenCLIP's zero-shot classification on Fashion-MNIST's test images. Each class's
// text embedding is the normalised mean over the caption templates; an image's prediction is the
// class with the highest cosine similarity. Top-1 accuracy is the quality figure.
#pragma once

#include <torch/torch.h>

#include "runtime/data/fashion_mnist.h"
#include "runtime/model/clip_model.h"
#include "runtime/text/tokenizer.h"

namespace dtrain::clip {

struct ZeroShotResult {
  double top1 = 0;
  int64_t images = 0;
  double seconds = 0;
};

// [classes, embed] unit rows: template-averaged class embeddings.
torch::Tensor ZeroShotClassifier(ClipModel& model, const Tokenizer& tokenizer,
                                 torch::Device device);

// Evaluates without gradients, `batch_size` images at a time (under any autocast in effect).
ZeroShotResult ZeroShotTop1(ClipModel& model, const Tokenizer& tokenizer,
                            const FashionMnistImages& test, torch::Device device,
                            int64_t batch_size = 1000);

}  // namespace dtrain::clip
