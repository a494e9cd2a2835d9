// Images in and out of files: PNG (libpng) and JPEG (libjpeg) decoding and encoding, gray/RGB
// conversion, bilinear resizing, and normalisation into the float layout a model takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::clip {

// An 8-bit image as decoded: height rows of width pixels of `channels` (1 gray, 3 RGB) interleaved.
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> data;  // height * width * channels
};

// Decodes PNG or JPEG (told apart by their magic bytes). `name` (a path, a tar member) is what
// errors name: throws std::runtime_error "NAME: not a PNG or JPEG image" / "NAME: corrupt PNG:
// ...".
Image DecodeImage(const uint8_t* bytes, size_t size, const std::string& name);
// Reads and decodes a file; a missing or unreadable file is an error naming it.
Image ReadImageFile(const std::string& path);

std::vector<uint8_t> EncodePng(const Image& image);
std::vector<uint8_t> EncodeJpeg(const Image& image, int quality = 95);

// Gray -> RGB repeats the value; RGB -> gray uses ITU-R BT.601 luma weights.
Image ConvertChannels(const Image& image, int channels);
// Bilinear resampling with half-pixel centres (as PIL/torchvision without antialiasing).
Image ResizeBilinear(const Image& image, int width, int height);

// Per-channel mean and standard deviation of pixels scaled to [0, 1].
struct Normalization {
  float mean[3];
  float std[3];
};
// Fashion-MNIST's for 1 channel, OpenAI CLIP's for 3.
Normalization NormalizationFor(int channels);

// Converts to `channels`, resizes to size x size when needed and writes (x/255 - mean)/std as
// channels x size x size floats (CHW) at `out`.
void ImageToModelInput(const Image& image, int channels, int size, float* out);
// The same conversion and resize, but the 8-bit values as they are (CHW, not normalised): what the
// trainer normalises itself on the device (NormalizationFor gives the mean and std).
void ImageToModelBytes(const Image& image, int channels, int size, uint8_t* out);

// Reads a whole file into memory; throws std::runtime_error naming the path.
std::vector<uint8_t> ReadFileBytes(const std::string& path);
// Writes bytes to a file; throws std::runtime_error naming the path.
void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace dtrain::clip
