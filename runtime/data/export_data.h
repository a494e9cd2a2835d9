// Writes Fashion-MNIST in the formats the csv and webdataset loaders read, so those loaders are
// used (and tested) on real images: PNG files plus a CSV, or tar shards of key.png/.txt/.cls.
// The images as stored (28x28 grey PNG), or resized, RGB and JPEG: what a loader decodes for a
// 224x224 model (the GPU bench feeds vit-b-32 from such shards).
#pragma once

#include <cstdint>
#include <string>

namespace dtrain::clip {

// What to export and where. Captions cycle through the templates: sample i gets
// FashionMnistCaption(label, i).
struct ExportOptions {
  std::string format = "csv";   // csv | webdataset
  std::string out_dir;          // created if missing
  std::string split = "train";  // train | test
  int64_t limit = 0;            // first N samples; 0: the whole split
  int64_t shard_size = 1000;    // samples per tar shard (webdataset)
  std::string source_dir;       // Fashion-MNIST idx files; empty: the Debian location
  int image_size = 28;          // side of the written images (bilinear resize from 28)
  int channels = 1;             // 1 (grey, as stored) or 3 (RGB, the grey on all three)
  std::string image_format = "png";  // png | jpeg (quality 90)
};

// What was written. `train_data` is what --train-data takes to read it back: the CSV path, or the
// shard pattern with a brace range (".../fashion-mnist-train-{0000..0005}.tar").
struct ExportSummary {
  int64_t samples = 0;
  int64_t files = 0;  // PNG files (csv) or shards (webdataset)
  std::string train_data;
};

// Throws std::runtime_error naming the path on a bad format/split or when a file cannot be written.
ExportSummary ExportFashionMnist(const ExportOptions& options);

}  // namespace dtrain::clip
