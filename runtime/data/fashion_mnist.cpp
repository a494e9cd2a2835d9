#include "runtime/data/fashion_mnist.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "runtime/data/image_codec.h"

namespace dtrain::clip {
namespace {

// A gzip'd (or plain: zlib reads both) file read whole.
std::vector<uint8_t> ReadGzipFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  int n;
  while ((n = gzread(file, chunk, sizeof chunk)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  int code = Z_OK;
  std::string message = n < 0 ? gzerror(file, &code) : "";
  gzclose(file);
  if (n < 0) throw std::runtime_error(path + ": corrupt gzip data: " + message);
  return bytes;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Checks the idx header (magic 0x0000080N for N dimensions of unsigned bytes) and returns the
// dimensions; the payload follows the header.
std::vector<uint32_t> IdxDimensions(const std::vector<uint8_t>& bytes, int dims,
                                    const std::string& path) {
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header || BigEndian32(bytes.data()) != 0x800u + dims) {
    throw std::runtime_error(path + ": not an idx file of " + std::to_string(dims) +
                             "-dimensional unsigned bytes");
  }
  std::vector<uint32_t> shape;
  size_t payload = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(BigEndian32(bytes.data() + 4 + 4 * d));
    payload *= shape.back();
  }
  if (bytes.size() != header + payload) {
    throw std::runtime_error(path + ": truncated idx file: " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(header + payload));
  }
  return shape;
}

}  // namespace

std::string DefaultFashionMnistDir() {
  return "/usr/share/datasets/fashion-mnist";
}

const std::vector<std::string>& FashionMnistClassNames() {
  static const std::vector<std::string> kNames = {"t-shirt", "trouser",   "pullover", "dress",
                                                  "coat",    "sandal",    "shirt",    "sneaker",
                                                  "bag",     "ankle boot"};
  return kNames;
}

const std::vector<std::string>& FashionMnistTemplates() {
  // A subset of OpenCLIP's ImageNet templates, short enough for a 30-byte caption.
  static const std::vector<std::string> kTemplates = {
      "a photo of a {}.",  "a bad photo of a {}.", "a good photo of a {}.",  "a photo of the {}.",
      "a photo of my {}.", "itap of a {}.",        "a close photo of a {}.", "art of the {}."};
  return kTemplates;
}

std::string FillTemplate(const std::string& caption_template, const std::string& class_name) {
  std::string caption = caption_template;
  size_t at = caption.find("{}");
  if (at != std::string::npos) caption.replace(at, 2, class_name);
  return caption;
}

std::string FashionMnistCaption(int label, int64_t template_index) {
  const auto& names = FashionMnistClassNames();
  const auto& templates = FashionMnistTemplates();
  if (label < 0 || label >= static_cast<int>(names.size())) {
    throw std::out_of_range("Fashion-MNIST label " + std::to_string(label) + " is not in 0..9");
  }
  const int64_t n = static_cast<int64_t>(templates.size());
  return FillTemplate(templates[static_cast<size_t>(((template_index % n) + n) % n)], names[label]);
}

FashionMnistSplit LoadFashionMnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "test") {
    throw std::runtime_error("Fashion-MNIST split '" + split + "': expected train or test");
  }
  const std::string base =
      (dir.empty() ? DefaultFashionMnistDir() : dir) + "/" + (split == "train" ? "train" : "t10k");
  const std::string images_path = base + "-images-idx3-ubyte.gz";
  const std::string labels_path = base + "-labels-idx1-ubyte.gz";
  std::vector<uint8_t> images = ReadGzipFile(images_path);
  std::vector<uint8_t> labels = ReadGzipFile(labels_path);
  std::vector<uint32_t> image_shape = IdxDimensions(images, 3, images_path);
  std::vector<uint32_t> label_shape = IdxDimensions(labels, 1, labels_path);
  if (image_shape[1] != kFashionMnistSide || image_shape[2] != kFashionMnistSide) {
    throw std::runtime_error(images_path + ": images are " + std::to_string(image_shape[1]) + "x" +
                             std::to_string(image_shape[2]) + ", expected 28x28");
  }
  if (image_shape[0] != label_shape[0]) {
    throw std::runtime_error(labels_path + ": " + std::to_string(label_shape[0]) + " labels for " +
                             std::to_string(image_shape[0]) + " images");
  }
  FashionMnistSplit data;
  data.count = image_shape[0];
  data.pixels.assign(images.begin() + 16, images.end());
  data.labels.assign(labels.begin() + 8, labels.end());
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] >= kFashionMnistClasses) {
      throw std::runtime_error(labels_path + ": label " + std::to_string(data.labels[i]) +
                               " of sample " + std::to_string(i) + " is not in 0..9");
    }
  }
  return data;
}

FashionMnistImages LoadFashionMnistTest(const std::string& dir, int channels, int image_size,
                                        int64_t limit) {
  FashionMnistSplit test = LoadFashionMnist(dir, "test");
  FashionMnistImages out;
  out.count = limit > 0 && limit < test.count ? limit : test.count;
  out.channels = channels;
  out.height = out.width = image_size;
  const size_t sample = static_cast<size_t>(channels) * image_size * image_size;
  const size_t side2 = kFashionMnistSide * kFashionMnistSide;
  out.pixels.resize(static_cast<size_t>(out.count) * sample);
  out.labels.resize(static_cast<size_t>(out.count));
  Image image{kFashionMnistSide, kFashionMnistSide, 1, std::vector<uint8_t>(side2)};
  for (int64_t i = 0; i < out.count; ++i) {
    std::memcpy(image.data.data(), &test.pixels[static_cast<size_t>(i) * side2], side2);
    ImageToModelInput(image, channels, image_size, &out.pixels[static_cast<size_t>(i) * sample]);
    out.labels[static_cast<size_t>(i)] = test.labels[static_cast<size_t>(i)];
  }
  return out;
}

}  // namespace dtrain::clip
