// Loader throughput: samples/s of each dataset type through MakeBatchSource (background
// threads, prefetch queue, decoding, resizing, normalisation), side by side in one run, at
// fmnist-tiny's input (1x28x28) and vit-b-32's (3x224x224), the latter both as floats and as the
// 8-bit pixels the GPU path takes (--raw-pixels). At 224 it also reads a WebDataset of 224x224
// JPEGs (photo-like: Fashion-MNIST upscaled, tinted per class, with pixel noise so the files are
// as large as photos' are) and ends with what one loader thread's rate makes on 16 threads.
// Usage: data_loader_bench [samples]
//
// `--scaling` measures instead how the rate grows with the loader threads on this machine's cores,
// on WebDataset shards given (bench/clip_gpu.sh: the JPEG shards it exported, on a GPU machine's
// cores), as the GPU path loads them (8-bit pixels, batch 256), and prints one JSON object:
//   data_loader_bench --scaling PATTERN [--image-size 224] [--channels 3] [--samples N]
//                     [--workers 1,2,4,...]     (default: powers of two up to the cores, and those)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/data/data_source.h"
#include "runtime/data/export_data.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/tar_archive.h"

namespace clip = dtrain::clip;

double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

struct Rate {
  double per_second;      // wall clock
  double per_cpu_second;  // all threads' CPU time: stable on a busy machine
};

// Rates over `samples` samples, batch 256, epoch after epoch until that many came (the table
// asks for one epoch of that length; --scaling reads a smaller dataset several times).
Rate Measure(clip::DataOptions options, int64_t samples) {
  options.batch_size = 256;
  options.prefetch = 8;
  options.drop_last = false;
  auto source = clip::MakeBatchSource(options);
  const double cpu_start = CpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  clip::HostBatch batch;
  int64_t seen = 0;
  for (int epoch = 0; seen < samples; ++epoch) {
    source->StartEpoch(epoch);
    int64_t in_epoch = 0;
    while (seen < samples && source->Next(batch)) {
      seen += batch.size;
      in_epoch += batch.size;
    }
    if (in_epoch == 0) throw std::runtime_error(options.train_data + ": an epoch with no sample");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {static_cast<double>(seen) / seconds,
          static_cast<double>(seen) / (CpuSeconds() - cpu_start)};
}

// `--scaling`: see the top of this file.
int Scaling(int argc, char** argv) {
  clip::DataOptions o;
  o.dataset_type = "webdataset";
  o.channels = 3;
  o.image_size = 224;
  o.raw_pixels = true;
  int64_t samples = 8192;
  const int cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  std::vector<int> workers;
  for (int w = 1; w < cores; w *= 2) workers.push_back(w);
  workers.push_back(cores);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--scaling" && value) {
      o.train_data = value;
    } else if (arg == "--image-size" && value) {
      o.image_size = std::atoi(value);
    } else if (arg == "--channels" && value) {
      o.channels = std::atoi(value);
    } else if (arg == "--samples" && value) {
      samples = std::atoll(value);
    } else if (arg == "--workers" && value) {
      workers.clear();
      std::stringstream list(value);
      for (std::string w; std::getline(list, w, ',');) workers.push_back(std::atoi(w.c_str()));
    } else {
      std::fprintf(stderr, "data_loader_bench: unknown or incomplete argument '%s'\n", argv[i]);
      return 2;
    }
    ++i;
  }
  if (o.train_data.empty() || o.image_size < 1 || o.channels < 1 || samples < 1 ||
      workers.empty() || std::any_of(workers.begin(), workers.end(), [](int w) { return w < 1; })) {
    std::fprintf(stderr,
                 "data_loader_bench --scaling PATTERN: a shard pattern, sizes, samples "
                 "and workers of at least 1\n");
    return 2;
  }
  std::string rates;
  for (int w : workers) {
    o.workers = w;
    const Rate rate = Measure(o, samples);
    char entry[160];
    std::snprintf(entry, sizeof entry,
                  "%s{\"workers\": %d, \"samples_per_s\": %.1f, \"samples_per_cpu_s\": %.1f}",
                  rates.empty() ? "" : ", ", w, rate.per_second, rate.per_cpu_second);
    rates += entry;
  }
  std::printf(
      "{\"cores\": %d, \"samples\": %lld, \"image_size\": %d, \"channels\": %d, "
      "\"pixels\": \"uint8\", \"batch_size\": 256, \"rates\": [%s]}\n",
      cores, static_cast<long long>(samples), o.image_size, o.channels, rates.c_str());
  return 0;
}

struct JpegShards {
  std::string pattern;  // what --train-data takes
  double mean_bytes = 0;
};

// `count` test images as side x side RGB JPEGs (quality 90) in shards of 250, key.jpg/.txt/.cls.
JpegShards WriteJpegShards(const std::string& dir, int64_t count, int side) {
  std::filesystem::create_directories(dir);
  const clip::FashionMnistSplit data = clip::LoadFashionMnist("", "test");
  count = std::min(count, data.count);
  constexpr int64_t kShard = 250;  // enough shards for 2 loader threads at 1000 samples
  const int64_t shards = (count + kShard - 1) / kShard;
  double bytes = 0;
  uint32_t noise = 12345;
  char name[64];
  for (int64_t s = 0; s < shards; ++s) {
    std::snprintf(name, sizeof name, "/jpeg-%04lld.tar", static_cast<long long>(s));
    clip::TarWriter tar(dir + name);
    for (int64_t i = s * kShard; i < std::min(count, (s + 1) * kShard); ++i) {
      constexpr size_t kPixels = clip::kFashionMnistSide * clip::kFashionMnistSide;
      const uint8_t* first = &data.pixels[static_cast<size_t>(i) * kPixels];
      clip::Image gray{clip::kFashionMnistSide, clip::kFashionMnistSide, 1,
                       std::vector<uint8_t>(first, first + kPixels)};
      clip::Image rgb = clip::ResizeBilinear(clip::ConvertChannels(gray, 3), side, side);
      const int label = data.labels[static_cast<size_t>(i)];
      for (size_t p = 0; p < rgb.data.size(); ++p) {
        noise = noise * 1664525u + 1013904223u;
        const int tint = (static_cast<int>(p % 3) * 37 + label * 23) % 64;
        const int value = rgb.data[p] * 3 / 4 + tint + static_cast<int>(noise >> 28) * 3;
        rgb.data[p] = static_cast<uint8_t>(std::min(255, value));
      }
      const std::vector<uint8_t> jpeg = clip::EncodeJpeg(rgb, 90);
      bytes += static_cast<double>(jpeg.size());
      std::snprintf(name, sizeof name, "%08lld", static_cast<long long>(i));
      const std::string caption = clip::FashionMnistCaption(label, i);
      const std::string cls = std::to_string(label);
      tar.Add(std::string(name) + ".jpg", jpeg);
      tar.Add(std::string(name) + ".txt", std::vector<uint8_t>(caption.begin(), caption.end()));
      tar.Add(std::string(name) + ".cls", std::vector<uint8_t>(cls.begin(), cls.end()));
    }
    tar.Finish();
  }
  std::snprintf(name, sizeof name, "/jpeg-{0000..%04lld}.tar", static_cast<long long>(shards - 1));
  return {dir + name, bytes / static_cast<double>(count)};
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--scaling") == 0) {
    try {
      return Scaling(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "data_loader_bench: %s\n", e.what());
      return 1;
    }
  }
  const int64_t samples = argc > 1 ? std::atoll(argv[1]) : 10000;
  char pattern[] = "/tmp/dtrain-loader-bench-XXXXXX";
  const std::string root = mkdtemp(pattern);
  clip::ExportOptions e;
  e.split = "test";
  e.limit = samples;
  e.out_dir = root + "/csv";
  const std::string csv = clip::ExportFashionMnist(e).train_data;
  e.format = "webdataset";
  e.out_dir = root + "/wds";
  e.shard_size = 1000;
  const std::string shards = clip::ExportFashionMnist(e).train_data;

  const JpegShards jpeg = WriteJpegShards(root + "/jpeg", samples / 4, 224);

  std::printf("%-16s %-10s %-6s %8s %12s %16s\n", "dataset", "input", "pixels", "workers",
              "samples/s", "samples/cpu-s");
  double jpeg_per_cpu_second = 0;  // 224x224 JPEGs to 8-bit pixels, one worker
  for (int size : {28, 224}) {
    for (bool raw : {false, true}) {
      if (size == 28 && raw) continue;  // fmnist-tiny trains on the CPU: floats
      for (int workers : {1, 2}) {
        for (const char* type : {"fashion-mnist", "csv", "webdataset", "webdataset-jpeg",
                                 "synthetic"}) {
          const std::string t = type;
          if (t == "webdataset-jpeg" && size != 224) continue;
          clip::DataOptions o;
          o.dataset_type = t == "webdataset-jpeg" ? "webdataset" : t;
          o.train_data = t == "csv"               ? csv
                         : t == "webdataset"      ? shards
                         : t == "webdataset-jpeg" ? jpeg.pattern
                                                  : "";
          o.channels = size == 28 ? 1 : 3;
          o.image_size = size;
          o.workers = workers;
          o.raw_pixels = raw;
          const int64_t n = size == 28 ? samples : samples / 4;
          if (o.dataset_type != "csv") o.train_num_samples = n;
          const Rate rate = Measure(o, n);
          if (t == "webdataset-jpeg" && raw && workers == 1) jpeg_per_cpu_second = rate.per_cpu_second;
          std::printf("%-16s %-10s %-6s %8d %12.0f %16.0f\n", type,
                      (std::to_string(o.channels) + "x" + std::to_string(size)).c_str(),
                      raw ? "uint8" : "float", workers, rate.per_second, rate.per_cpu_second);
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("webdataset-jpeg: 224x224 JPEGs of %.1f KB on average; one loader thread decodes "
              "%.0f samples per CPU-second to 8-bit pixels, so 16 threads at that rate make "
              "%.0f samples/s (goal: 10000)\n",
              jpeg.mean_bytes / 1024, jpeg_per_cpu_second, 16 * jpeg_per_cpu_second);
  std::filesystem::remove_all(root);
  return 0;
}
