// Fashion-MNIST as Debian's dataset-fashion-mnist ships it: gzip'd idx files, ten class names and
// the caption templates that turn a label into a CLIP caption ("a photo of a sneaker.").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::clip {

constexpr int kFashionMnistSide = 28;  // images are 28x28, one 8-bit gray channel
constexpr int kFashionMnistClasses = 10;
// Mean and standard deviation of the training pixels scaled to [0, 1] (used for 1-channel input).
constexpr float kFashionMnistMean = 0.2860f;
constexpr float kFashionMnistStd = 0.3530f;

// Where Debian installs the files: {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
std::string DefaultFashionMnistDir();

// "t-shirt", "trouser", ..., "ankle boot", in label order.
const std::vector<std::string>& FashionMnistClassNames();
// OpenCLIP-style templates, each with one "{}". All fit the byte-level context of fmnist-tiny
// (30 bytes between the start and end tokens) even with the longest class name.
const std::vector<std::string>& FashionMnistTemplates();
// The template with "{}" replaced by the class name.
std::string FillTemplate(const std::string& caption_template, const std::string& class_name);
// The caption of class `label` with template `template_index` (taken modulo the template count).
std::string FashionMnistCaption(int label, int64_t template_index);

// One split as stored: raw 8-bit pixels, row-major, count x 28 x 28.
struct FashionMnistSplit {
  int64_t count = 0;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;  // 0..9
};

// Reads `split` ("train" or "test") from `dir` (empty: the Debian location). Throws
// std::runtime_error naming the file when it is missing, truncated or not an idx file.
FashionMnistSplit LoadFashionMnist(const std::string& dir, const std::string& split);

// A split ready for a model: converted to `channels` (1 or 3), resized to image_size x image_size,
// normalised (Fashion-MNIST mean/std for 1 channel, OpenAI CLIP's for 3), laid out NCHW.
struct FashionMnistImages {
  int64_t count = 0;
  int channels = 1, height = kFashionMnistSide, width = kFashionMnistSide;
  std::vector<float> pixels;  // count * channels * height * width
  std::vector<int> labels;
};

// The zero-shot evaluation set: the test split (10,000 images), or its first `limit` when > 0.
FashionMnistImages LoadFashionMnistTest(const std::string& dir, int channels, int image_size,
                                        int64_t limit = 0);

}  // namespace dtrain::clip
