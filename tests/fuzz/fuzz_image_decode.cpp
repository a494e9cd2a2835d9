// PNG and JPEG decoding (libpng, libjpeg) as the data loaders call it, then the resize to the
// model's input: an image or std::runtime_error, for any bytes.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "runtime/data/image_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dtrain::clip::Image image = dtrain::clip::DecodeImage(data, size, "fuzz");
    std::vector<float> pixels(3 * 32 * 32);
    dtrain::clip::ImageToModelInput(image, 3, 32, pixels.data());
  } catch (const std::runtime_error&) {
  }
  return 0;
}
