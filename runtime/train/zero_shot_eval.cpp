#include "runtime/train/zero_shot_eval.h"

#include <chrono>

namespace dtrain::clip {

torch::Tensor ZeroShotClassifier(ClipModel& model, const Tokenizer& tokenizer,
                                 torch::Device device) {
  torch::NoGradGuard no_grad;
  const auto& templates = FashionMnistTemplates();
  std::vector<torch::Tensor> classes;
  for (const std::string& name : FashionMnistClassNames()) {
    std::vector<std::string> captions;
    for (const std::string& t : templates) captions.push_back(FillTemplate(t, name));
    std::vector<int64_t> rows = tokenizer.Tokenize(captions);
    auto tokens =
        torch::from_blob(rows.data(),
                         {static_cast<int64_t>(captions.size()), tokenizer.context_length()},
                         torch::kLong)
            .to(device);
    auto mean = model->EncodeText(tokens).to(torch::kFloat).mean(0);
    classes.push_back(mean / mean.norm());
  }
  return torch::stack(classes);
}

ZeroShotResult ZeroShotTop1(ClipModel& model, const Tokenizer& tokenizer,
                            const FashionMnistImages& test, torch::Device device,
                            int64_t batch_size) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  auto classifier = ZeroShotClassifier(model, tokenizer, device);
  auto images =
      torch::from_blob(const_cast<float*>(test.pixels.data()),
                       {test.count, test.channels, test.height, test.width}, torch::kFloat);
  auto labels = torch::from_blob(const_cast<int*>(test.labels.data()), {test.count}, torch::kInt)
                    .to(torch::kLong);
  int64_t correct = 0;
  for (int64_t begin = 0; begin < test.count; begin += batch_size) {
    const int64_t n = std::min(batch_size, test.count - begin);
    auto features = model->EncodeImage(images.narrow(0, begin, n).to(device)).to(torch::kFloat);
    auto predicted = torch::matmul(features, classifier.t()).argmax(-1).cpu();
    correct += predicted.eq(labels.narrow(0, begin, n)).sum().item<int64_t>();
  }
  ZeroShotResult result;
  result.images = test.count;
  result.top1 = test.count ? static_cast<double>(correct) / static_cast<double>(test.count) : 0;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dtrain::clip
