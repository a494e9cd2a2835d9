#include "runtime/data/image_codec.h"

#include <png.h>
// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>
#include <cstdio>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace dtrain::clip {
namespace {

bool IsPng(const uint8_t* bytes, size_t size) {
  static const uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return size >= 8 && std::memcmp(bytes, kMagic, 8) == 0;
}

bool IsJpeg(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff;
}

Image DecodePng(const uint8_t* bytes, size_t size, const std::string& name) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes, size)) {
    throw std::runtime_error(name + ": corrupt PNG: " + png.message);
  }
  Image image;
  image.channels = (png.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
  png.format = image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  image.width = static_cast<int>(png.width);
  image.height = static_cast<int>(png.height);
  image.data.resize(PNG_IMAGE_SIZE(png));
  // Transparent pixels are composited on black (background == nullptr).
  if (!png_image_finish_read(&png, nullptr, image.data.data(), 0, nullptr)) {
    std::string message = png.message;
    png_image_free(&png);
    throw std::runtime_error(name + ": corrupt PNG: " + message);
  }
  return image;
}

// libjpeg reports errors through error_exit, which must not return: it jumps back to the
// setjmp in DecodeJpegInto, whose frame holds only plain C data.
struct JpegErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr info) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(info->err);
  (*info->err->format_message)(info, manager->message);
  std::longjmp(manager->jump, 1);
}

void JpegSilence(j_common_ptr, int) {}

// Returns false with `manager.message` set on error. `image` is sized before any row is read.
bool DecodeJpegInto(const uint8_t* bytes, size_t size, Image* image, JpegErrorManager* manager) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&manager->base);
  manager->base.error_exit = JpegErrorExit;
  manager->base.emit_message = JpegSilence;
  if (setjmp(manager->jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  info.out_color_space = info.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  image->width = static_cast<int>(info.output_width);
  image->height = static_cast<int>(info.output_height);
  image->channels = info.output_components;
  image->data.resize(static_cast<size_t>(image->width) * image->height * image->channels);
  const size_t stride = static_cast<size_t>(image->width) * image->channels;
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = image->data.data() + info.output_scanline * stride;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

bool EncodeJpegInto(const Image& image, int quality, unsigned char** out, unsigned long* out_size,
                    JpegErrorManager* manager) {
  jpeg_compress_struct info;
  info.err = jpeg_std_error(&manager->base);
  manager->base.error_exit = JpegErrorExit;
  if (setjmp(manager->jump)) {
    jpeg_destroy_compress(&info);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, out, out_size);
  info.image_width = static_cast<JDIMENSION>(image.width);
  info.image_height = static_cast<JDIMENSION>(image.height);
  info.input_components = image.channels;
  info.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  while (info.next_scanline < info.image_height) {
    auto* row = const_cast<JSAMPROW>(image.data.data() + info.next_scanline * stride);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

void CheckImage(const Image& image) {
  if (image.width <= 0 || image.height <= 0 || (image.channels != 1 && image.channels != 3) ||
      image.data.size() != static_cast<size_t>(image.width) * image.height * image.channels) {
    throw std::invalid_argument("image: expected 1 or 3 channels and width*height*channels bytes");
  }
}

// One lookup table per channel: the 256 normalised values, computed once per channel count.
const std::array<std::array<float, 256>, 3>& NormalizationTable(int channels) {
  static const auto kTables = [] {
    std::array<std::array<std::array<float, 256>, 3>, 2> tables;
    for (int t = 0; t < 2; ++t) {
      const Normalization norm = NormalizationFor(t == 0 ? 1 : 3);
      for (int k = 0; k < 3; ++k) {
        for (int v = 0; v < 256; ++v) tables[t][k][v] = (v / 255.0f - norm.mean[k]) / norm.std[k];
      }
    }
    return tables;
  }();
  return kTables[channels == 1 ? 0 : 1];
}

}  // namespace

Image DecodeImage(const uint8_t* bytes, size_t size, const std::string& name) {
  if (IsPng(bytes, size)) return DecodePng(bytes, size, name);
  if (IsJpeg(bytes, size)) {
    Image image;
    JpegErrorManager manager;
    if (!DecodeJpegInto(bytes, size, &image, &manager)) {
      throw std::runtime_error(name + ": corrupt JPEG: " + manager.message);
    }
    return image;
  }
  throw std::runtime_error(name + ": not a PNG or JPEG image (" + std::to_string(size) + " bytes)");
}

Image ReadImageFile(const std::string& path) {
  std::vector<uint8_t> bytes = ReadFileBytes(path);
  return DecodeImage(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> EncodePng(const Image& image) {
  CheckImage(image);
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.data.data(), 0, nullptr)) {
    throw std::runtime_error(std::string("PNG encoding failed: ") + png.message);
  }
  std::vector<uint8_t> bytes(size);
  if (!png_image_write_to_memory(&png, bytes.data(), &size, 0, image.data.data(), 0, nullptr)) {
    throw std::runtime_error(std::string("PNG encoding failed: ") + png.message);
  }
  bytes.resize(size);
  return bytes;
}

std::vector<uint8_t> EncodeJpeg(const Image& image, int quality) {
  CheckImage(image);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  JpegErrorManager manager;
  bool ok = EncodeJpegInto(image, quality, &out, &out_size, &manager);
  std::vector<uint8_t> bytes;
  if (ok) bytes.assign(out, out + out_size);
  std::free(out);
  if (!ok) throw std::runtime_error(std::string("JPEG encoding failed: ") + manager.message);
  return bytes;
}

Image ConvertChannels(const Image& image, int channels) {
  if (image.channels == channels) return image;
  Image out{image.width, image.height, channels, {}};
  const size_t pixels = static_cast<size_t>(image.width) * image.height;
  out.data.resize(pixels * channels);
  const uint8_t* in = image.data.data();
  if (channels == 3) {
    for (size_t i = 0; i < pixels; ++i) std::fill_n(&out.data[i * 3], 3, in[i]);
  } else {
    for (size_t i = 0; i < pixels; ++i) {
      const uint8_t* p = in + i * 3;
      // 0.299 R + 0.587 G + 0.114 B in 16-bit fixed point, rounded.
      out.data[i] = static_cast<uint8_t>((19595 * p[0] + 38470 * p[1] + 7471 * p[2] + 32768) >> 16);
    }
  }
  return out;
}

Image ResizeBilinear(const Image& image, int width, int height) {
  if (image.width == width && image.height == height) return image;
  Image out{width, height, image.channels, {}};
  out.data.resize(static_cast<size_t>(width) * height * image.channels);
  const int c = image.channels;
  // Source coordinates and weights per output column, computed once.
  std::vector<int> x0(width), x1(width);
  std::vector<float> wx(width);
  const float sx = static_cast<float>(image.width) / width;
  const float sy = static_cast<float>(image.height) / height;
  for (int x = 0; x < width; ++x) {
    float fx = std::clamp((x + 0.5f) * sx - 0.5f, 0.0f, static_cast<float>(image.width - 1));
    x0[x] = static_cast<int>(fx);
    x1[x] = std::min(x0[x] + 1, image.width - 1);
    wx[x] = fx - x0[x];
  }
  for (int y = 0; y < height; ++y) {
    float fy = std::clamp((y + 0.5f) * sy - 0.5f, 0.0f, static_cast<float>(image.height - 1));
    const int y0 = static_cast<int>(fy), y1 = std::min(y0 + 1, image.height - 1);
    const float wy = fy - y0;
    const uint8_t* r0 = &image.data[static_cast<size_t>(y0) * image.width * c];
    const uint8_t* r1 = &image.data[static_cast<size_t>(y1) * image.width * c];
    uint8_t* dst = &out.data[static_cast<size_t>(y) * width * c];
    for (int x = 0; x < width; ++x) {
      for (int k = 0; k < c; ++k) {
        float top = r0[x0[x] * c + k] + wx[x] * (r0[x1[x] * c + k] - r0[x0[x] * c + k]);
        float bottom = r1[x0[x] * c + k] + wx[x] * (r1[x1[x] * c + k] - r1[x0[x] * c + k]);
        dst[x * c + k] = static_cast<uint8_t>(std::lround(top + wy * (bottom - top)));
      }
    }
  }
  return out;
}

Normalization NormalizationFor(int channels) {
  if (channels == 1) {
    return {{0.2860f, 0.2860f, 0.2860f}, {0.3530f, 0.3530f, 0.3530f}};
  }
  // OpenAI CLIP's image mean and std (OpenCLIP's OPENAI_DATASET_MEAN/STD).
  return {{0.48145466f, 0.4578275f, 0.40821073f}, {0.26862954f, 0.26130258f, 0.27577711f}};
}

namespace {

// Converts `image` to at most `channels` and resizes it to size x size, then calls
// write(k, from, step) for each output channel k: its size*size values are from[i * step].
template <typename WritePlane>
void ConvertAndResize(const Image& image, int channels, int size, WritePlane write) {
  if (channels != 1 && channels != 3) throw std::invalid_argument("channels must be 1 or 3");
  CheckImage(image);
  // Shrink the channel count before resizing, grow it after (a gray image is resized once).
  const Image* src = &image;
  Image converted, resized;
  if (src->channels > channels) {
    converted = ConvertChannels(*src, channels);
    src = &converted;
  }
  if (src->width != size || src->height != size) {
    resized = ResizeBilinear(*src, size, size);
    src = &resized;
  }
  const int sc = src->channels;
  for (int k = 0; k < channels; ++k) write(k, src->data.data() + (sc == 1 ? 0 : k), sc);
}

}  // namespace

void ImageToModelInput(const Image& image, int channels, int size, float* out) {
  const std::array<std::array<float, 256>, 3>& table = NormalizationTable(channels);
  const size_t plane = static_cast<size_t>(size) * size;
  ConvertAndResize(image, channels, size, [&](int k, const uint8_t* from, int step) {
    const float* lut = table[k].data();
    float* dst = out + k * plane;
    for (size_t i = 0; i < plane; ++i) dst[i] = lut[from[i * step]];
  });
}

void ImageToModelBytes(const Image& image, int channels, int size, uint8_t* out) {
  const size_t plane = static_cast<size_t>(size) * size;
  ConvertAndResize(image, channels, size, [&](int k, const uint8_t* from, int step) {
    uint8_t* dst = out + k * plane;
    if (step == 1) {
      std::memcpy(dst, from, plane);
    } else {
      for (size_t i = 0; i < plane; ++i) dst[i] = from[i * step];
    }
  });
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) throw std::runtime_error(path + ": cannot read (not a regular file?)");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
    throw std::runtime_error(path + ": read failed");
  }
  return bytes;
}

void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error(path + ": write failed");
}

}  // namespace dtrain::clip
