// Fashion-MNIST as Debian ships it: the idx files, class names, caption templates, eval set.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "runtime/data/fashion_mnist.h"

namespace dtrain::clip {
namespace {

TEST(FashionMnist, ReadsBothSplitsWithTheirSizesAndLabels) {
  for (const auto& [split, expected] : {std::pair<std::string, int64_t>{"train", 60000},
                                        std::pair<std::string, int64_t>{"test", 10000}}) {
    FashionMnistSplit data = LoadFashionMnist("", split);
    EXPECT_EQ(data.count, expected) << split;
    EXPECT_EQ(data.pixels.size(), static_cast<size_t>(expected) * 28 * 28);
    ASSERT_EQ(data.labels.size(), static_cast<size_t>(expected));
    // Fashion-MNIST is balanced: each class has a tenth of the split.
    std::array<int64_t, 10> per_class{};
    for (uint8_t label : data.labels) {
      ASSERT_LT(label, 10);
      ++per_class[label];
    }
    for (int64_t n : per_class) EXPECT_EQ(n, expected / 10) << split;
  }
}

TEST(FashionMnist, NormalisationConstantsMatchTheTrainingPixels) {
  FashionMnistSplit data = LoadFashionMnist("", "train");
  double sum = 0, sum2 = 0;
  for (uint8_t p : data.pixels) {
    sum += p / 255.0;
    sum2 += (p / 255.0) * (p / 255.0);
  }
  const double n = static_cast<double>(data.pixels.size());
  const double mean = sum / n, std = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, kFashionMnistMean, 1e-3);
  EXPECT_NEAR(std, kFashionMnistStd, 1e-3);
}

TEST(FashionMnist, MissingFilesAreNamed) {
  try {
    LoadFashionMnist("/nonexistent/fmnist", "test");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/fmnist/t10k-images-idx3-ubyte.gz"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(LoadFashionMnist("", "validation"), std::runtime_error);
}

TEST(FashionMnist, TruncatedFilesAreErrorsNamingThem) {
  char pattern[] = "/tmp/dtrain-fmnist-test-XXXXXX";
  const std::filesystem::path dir = mkdtemp(pattern);
  const std::filesystem::path source = DefaultFashionMnistDir();
  for (const char* name : {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    std::filesystem::copy_file(source / name, dir / name);
  }
  const std::filesystem::path images = dir / "t10k-images-idx3-ubyte.gz";
  std::filesystem::resize_file(images, std::filesystem::file_size(images) / 2);
  try {
    LoadFashionMnist(dir.string(), "test");
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(images.string() + ": ", 0), 0u) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(FashionMnist, CaptionsNameTheClassAndFitTheByteContext) {
  ASSERT_EQ(FashionMnistClassNames().size(), 10u);
  EXPECT_EQ(FashionMnistClassNames()[9], "ankle boot");
  EXPECT_EQ(FashionMnistCaption(7, 0), "a photo of a sneaker.");
  for (int label = 0; label < 10; ++label) {
    for (size_t t = 0; t < FashionMnistTemplates().size(); ++t) {
      const std::string caption = FashionMnistCaption(label, static_cast<int64_t>(t));
      EXPECT_NE(caption.find(FashionMnistClassNames()[label]), std::string::npos);
      EXPECT_LE(caption.size(), 30u) << caption;  // context 32 minus start and end tokens
    }
  }
  EXPECT_THROW(FashionMnistCaption(10, 0), std::out_of_range);
}

TEST(FashionMnist, EvalSetIsNormalisedResizedAndLabelled) {
  FashionMnistSplit raw = LoadFashionMnist("", "test");
  FashionMnistImages gray = LoadFashionMnistTest("", 1, 28, 100);
  ASSERT_EQ(gray.count, 100);
  ASSERT_EQ(gray.pixels.size(), 100u * 28 * 28);
  for (size_t i = 0; i < gray.pixels.size(); ++i) {
    ASSERT_NEAR(gray.pixels[i] * kFashionMnistStd + kFashionMnistMean, raw.pixels[i] / 255.0f,
                1e-5);
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(gray.labels[i], raw.labels[i]);

  // 3 channels at 56x56: every channel holds the same gray image, under CLIP's mean/std.
  FashionMnistImages rgb = LoadFashionMnistTest("", 3, 56, 2);
  ASSERT_EQ(rgb.pixels.size(), 2u * 3 * 56 * 56);
  const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
  const float stdev[3] = {0.26862954f, 0.26130258f, 0.27577711f};
  for (int i = 0; i < 56 * 56; ++i) {
    const float v0 = rgb.pixels[i] * stdev[0] + mean[0];
    for (int c = 1; c < 3; ++c) {
      ASSERT_NEAR(rgb.pixels[c * 56 * 56 + i] * stdev[c] + mean[c], v0, 1e-5);
    }
  }
  // A 2x upscale keeps the mean brightness.
  double big = 0, small = 0;
  for (int i = 0; i < 56 * 56; ++i) big += rgb.pixels[i] * stdev[0] + mean[0];
  for (int i = 0; i < 28 * 28; ++i) small += raw.pixels[i] / 255.0;
  EXPECT_NEAR(big / (56 * 56), small / (28 * 28), 0.01);
}

}  // namespace
}  // namespace dtrain::clip
