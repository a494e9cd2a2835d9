#include "runtime/data/export_data.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/tar_archive.h"

namespace dtrain::clip {
namespace {

std::string Numbered(const char* format, int64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, format, static_cast<long long>(value));
  return text;
}

// Sample i's image file as the options ask: its channels, size and encoding.
std::vector<uint8_t> SampleImageFile(const FashionMnistSplit& data, int64_t i,
                                     const ExportOptions& o) {
  constexpr size_t kPixels = kFashionMnistSide * kFashionMnistSide;
  const auto* first = &data.pixels[static_cast<size_t>(i) * kPixels];
  Image image{kFashionMnistSide, kFashionMnistSide, 1, std::vector<uint8_t>(first, first + kPixels)};
  if (o.channels != 1) image = ConvertChannels(image, o.channels);
  if (o.image_size != kFashionMnistSide) image = ResizeBilinear(image, o.image_size, o.image_size);
  return o.image_format == "jpeg" ? EncodeJpeg(image, 90) : EncodePng(image);
}

std::string ImageExtension(const ExportOptions& o) {
  return o.image_format == "jpeg" ? ".jpg" : ".png";
}

// A CSV field, quoted when it holds the separator, a quote or a line break.
std::string CsvField(const std::string& value) {
  if (value.find_first_of("\t\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

ExportSummary ExportCsv(const FashionMnistSplit& data, int64_t count, const ExportOptions& o) {
  const std::string images_dir = o.out_dir + "/images";
  std::filesystem::create_directories(images_dir);
  const std::string csv_path = o.out_dir + "/fashion-mnist-" + o.split + ".csv";
  std::ofstream csv(csv_path, std::ios::trunc);
  if (!csv) throw std::runtime_error(csv_path + ": cannot create");
  csv << "filepath\ttitle\n";
  for (int64_t i = 0; i < count; ++i) {
    const std::string name = "images/" + Numbered("%06lld", i) + ImageExtension(o);
    WriteFileBytes(o.out_dir + "/" + name, SampleImageFile(data, i, o));
    csv << CsvField(name) << '\t'
        << CsvField(FashionMnistCaption(data.labels[static_cast<size_t>(i)], i)) << '\n';
  }
  csv.close();
  if (!csv) throw std::runtime_error(csv_path + ": write failed");
  return ExportSummary{count, count, csv_path};
}

ExportSummary ExportWebDataset(const FashionMnistSplit& data, int64_t count,
                               const ExportOptions& o) {
  if (o.shard_size < 1) throw std::runtime_error("export: shard size must be at least 1");
  std::filesystem::create_directories(o.out_dir);
  const int64_t shards = (count + o.shard_size - 1) / o.shard_size;
  const std::string stem = o.out_dir + "/fashion-mnist-" + o.split + "-";
  for (int64_t s = 0; s < shards; ++s) {
    TarWriter tar(stem + Numbered("%04lld", s) + ".tar");
    for (int64_t i = s * o.shard_size; i < std::min(count, (s + 1) * o.shard_size); ++i) {
      const std::string key = Numbered("%06lld", i);
      const int label = data.labels[static_cast<size_t>(i)];
      const std::string caption = FashionMnistCaption(label, i);
      const std::string cls = std::to_string(label);
      tar.Add(key + ImageExtension(o), SampleImageFile(data, i, o));
      tar.Add(key + ".txt", std::vector<uint8_t>(caption.begin(), caption.end()));
      tar.Add(key + ".cls", std::vector<uint8_t>(cls.begin(), cls.end()));
    }
    tar.Finish();
  }
  return ExportSummary{count, shards, stem + "{0000.." + Numbered("%04lld", shards - 1) + "}.tar"};
}

}  // namespace

ExportSummary ExportFashionMnist(const ExportOptions& options) {
  if (options.format != "csv" && options.format != "webdataset") {
    throw std::runtime_error("export: format '" + options.format + "': expected csv or webdataset");
  }
  if (options.out_dir.empty()) throw std::runtime_error("export: no output folder given");
  if (options.image_format != "png" && options.image_format != "jpeg") {
    throw std::runtime_error("export: image format '" + options.image_format +
                             "': expected png or jpeg");
  }
  if (options.channels != 1 && options.channels != 3) {
    throw std::runtime_error("export: " + std::to_string(options.channels) +
                             " channels: expected 1 (grey) or 3 (RGB)");
  }
  if (options.image_size < 1 || options.image_size > 4096) {
    throw std::runtime_error("export: image size " + std::to_string(options.image_size) +
                             ": expected 1 to 4096 pixels");
  }
  const FashionMnistSplit data = LoadFashionMnist(options.source_dir, options.split);
  const int64_t count =
      options.limit > 0 && options.limit < data.count ? options.limit : data.count;
  try {
    return options.format == "csv" ? ExportCsv(data, count, options)
                                   : ExportWebDataset(data, count, options);
  } catch (const std::filesystem::filesystem_error& e) {
    throw std::runtime_error("export: " + std::string(e.what()));
  }
}

}  // namespace dtrain::clip
