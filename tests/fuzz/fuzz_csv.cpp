// A CSV/TSV of image paths and captions (--dataset-type csv): rows or std::runtime_error.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "runtime/data/data_source.h"
#include "runtime/data/sample_dataset.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtrain::clip::DataOptions options;
  options.dataset_type = "csv";
  options.train_data = dtrain::fuzz::WriteInput("train.csv", data, size);
  dtrain::clip::BadSampleLog bad(true);
  try {
    dtrain::clip::MakeCsvDataset(options, bad);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
