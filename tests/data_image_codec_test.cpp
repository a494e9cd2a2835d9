// PNG/JPEG decoding and encoding, channel conversion, resizing, normalisation.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/data/image_codec.h"

namespace dtrain::clip {
namespace {

Image Gradient(int width, int height, int channels) {
  Image image{width, height, channels, {}};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        image.data.push_back(static_cast<uint8_t>((x * 7 + y * 3 + c * 50) % 256));
      }
    }
  }
  return image;
}

TEST(ImageCodec, PngRoundTripsGrayAndRgb) {
  for (int channels : {1, 3}) {
    Image image = Gradient(13, 9, channels);
    std::vector<uint8_t> png = EncodePng(image);
    Image back = DecodeImage(png.data(), png.size(), "mem.png");
    EXPECT_EQ(back.width, 13);
    EXPECT_EQ(back.height, 9);
    EXPECT_EQ(back.channels, channels);
    EXPECT_EQ(back.data, image.data);
  }
}

TEST(ImageCodec, JpegRoundTripsWithinCompressionError) {
  Image image{32, 32, 3, std::vector<uint8_t>(32 * 32 * 3)};
  for (size_t i = 0; i < image.data.size(); ++i) image.data[i] = static_cast<uint8_t>(i / 96 * 8);
  std::vector<uint8_t> jpeg = EncodeJpeg(image, 95);
  Image back = DecodeImage(jpeg.data(), jpeg.size(), "mem.jpg");
  ASSERT_EQ(back.channels, 3);
  ASSERT_EQ(back.data.size(), image.data.size());
  double error = 0;
  for (size_t i = 0; i < image.data.size(); ++i) error += std::abs(back.data[i] - image.data[i]);
  EXPECT_LT(error / image.data.size(), 3.0);
}

TEST(ImageCodec, CorruptAndForeignBytesAreErrorsNamingTheSource) {
  std::vector<uint8_t> png = EncodePng(Gradient(40, 40, 1));
  std::vector<uint8_t> cut(png.begin(), png.begin() + static_cast<long>(png.size() / 2));
  for (auto [bytes, name] : {std::pair{cut, std::string("shard.tar:7.png")},
                             std::pair{std::vector<uint8_t>{'h', 'i'}, std::string("a.txt")}}) {
    try {
      DecodeImage(bytes.data(), bytes.size(), name);
      FAIL() << "expected an error for " << name;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    }
  }
  std::vector<uint8_t> jpeg = EncodeJpeg(Gradient(40, 40, 3));
  jpeg.resize(200);
  jpeg.insert(jpeg.end(), 50, 0x00);
  EXPECT_THROW(DecodeImage(jpeg.data(), jpeg.size(), "bad.jpg"), std::runtime_error);
  EXPECT_THROW(ReadImageFile("/nonexistent/x.png"), std::runtime_error);
}

TEST(ImageCodec, ConvertsChannels) {
  Image rgb{1, 1, 3, {255, 0, 0}};
  EXPECT_EQ(ConvertChannels(rgb, 1).data, std::vector<uint8_t>{76});  // 0.299 * 255
  Image gray{2, 1, 1, {10, 200}};
  EXPECT_EQ(ConvertChannels(gray, 3).data, (std::vector<uint8_t>{10, 10, 10, 200, 200, 200}));
}

TEST(ImageCodec, ResizesBilinearly) {
  Image flat{5, 3, 1, std::vector<uint8_t>(15, 77)};
  Image up = ResizeBilinear(flat, 11, 7);
  EXPECT_EQ(up.data, std::vector<uint8_t>(77, 77));
  // Halving a 2-pixel ramp averages neighbours (half-pixel centres).
  Image ramp{4, 1, 1, {0, 100, 200, 250}};
  EXPECT_EQ(ResizeBilinear(ramp, 2, 1).data, (std::vector<uint8_t>{50, 225}));
  Image two{2, 1, 1, {0, 200}};
  EXPECT_EQ(ResizeBilinear(two, 4, 1).data, (std::vector<uint8_t>{0, 50, 150, 200}));
}

TEST(ImageCodec, ModelInputIsNormalisedChw) {
  Image rgb{2, 2, 3, {0, 128, 255, 0, 128, 255, 0, 128, 255, 0, 128, 255}};
  std::vector<float> out(3 * 4);
  ImageToModelInput(rgb, 3, 2, out.data());
  Normalization n = NormalizationFor(3);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(out[i], (0 - n.mean[0]) / n.std[0]);
    EXPECT_FLOAT_EQ(out[4 + i], (128 / 255.0f - n.mean[1]) / n.std[1]);
    EXPECT_FLOAT_EQ(out[8 + i], (1 - n.mean[2]) / n.std[2]);
  }
  // RGB -> 1 channel at a new size uses luma and Fashion-MNIST's statistics.
  std::vector<float> gray(9);
  ImageToModelInput(rgb, 1, 3, gray.data());
  const float luma = (0.587f * 128 + 0.114f * 255) / 255.0f;
  for (float v : gray) EXPECT_NEAR(v * 0.3530f + 0.2860f, luma, 1.0f / 255);
}

}  // namespace
}  // namespace dtrain::clip
