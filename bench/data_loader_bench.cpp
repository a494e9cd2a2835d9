// Loader throughput: samples/s of each dataset type through MakeBatchSource (background
// threads, prefetch queue, decoding, resizing, normalisation), side by side in one run, at
// fmnist-tiny's input (1x28x28) and vit-b-32's (3x224x224). Usage: data_loader_bench [samples]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/data/data_source.h"
#include "runtime/data/export_data.h"

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

// Rates over `samples` samples (one epoch), batch 256.
Rate Measure(clip::DataOptions options, int64_t samples) {
  options.batch_size = 256;
  options.prefetch = 8;
  options.drop_last = false;
  if (options.dataset_type != "csv") options.train_num_samples = samples;
  auto source = clip::MakeBatchSource(options);
  const double cpu_start = CpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  source->StartEpoch(0);
  clip::HostBatch batch;
  int64_t seen = 0;
  while (seen < samples && source->Next(batch)) seen += batch.size;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {static_cast<double>(seen) / seconds,
          static_cast<double>(seen) / (CpuSeconds() - cpu_start)};
}

int main(int argc, char** argv) {
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

  std::printf("%-14s %-10s %8s %12s %16s\n", "dataset", "input", "workers", "samples/s",
              "samples/cpu-s");
  for (int size : {28, 224}) {
    for (int workers : {1, 2}) {
      for (const char* type : {"fashion-mnist", "csv", "webdataset", "synthetic"}) {
        clip::DataOptions o;
        o.dataset_type = type;
        o.train_data = std::string(type) == "csv"          ? csv
                       : std::string(type) == "webdataset" ? shards
                                                           : "";
        o.channels = size == 28 ? 1 : 3;
        o.image_size = size;
        o.workers = workers;
        const int64_t n = size == 28 ? samples : samples / 4;
        const Rate rate = Measure(o, n);
        std::printf("%-14s %-10s %8d %12.0f %16.0f\n", type,
                    (std::to_string(o.channels) + "x" + std::to_string(size)).c_str(), workers,
                    rate.per_second, rate.per_cpu_second);
        std::fflush(stdout);
      }
    }
  }
  std::filesystem::remove_all(root);
  return 0;
}
