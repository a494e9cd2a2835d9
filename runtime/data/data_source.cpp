// MakeBatchSource: the dataset type named in DataOptions -> its loader.
#include "runtime/data/data_source.h"

#include <cstdio>
#include <stdexcept>

#include "runtime/data/sample_dataset.h"

namespace dtrain::clip {

int64_t BatchSource::ResumeEpoch(int epoch, int64_t consumed) {
  if (consumed > 0) {
    std::fprintf(stderr,
                 "dtrain-clip: this data source streams and cannot pass over the %lld samples of "
                 "epoch %d already trained on: the epoch starts again from its beginning\n",
                 static_cast<long long>(consumed), epoch + 1);
  }
  StartEpoch(epoch);
  return BatchesPerEpoch();
}

std::unique_ptr<BatchSource> MakeBatchSource(const DataOptions& options) {
  if (options.channels != 1 && options.channels != 3) {
    throw std::runtime_error("data: the model takes " + std::to_string(options.channels) +
                             " channels; loaders produce 1 (gray) or 3 (RGB)");
  }
  if (options.image_size < 1) throw std::runtime_error("data: image size must be positive");
  const std::string& type = options.dataset_type;
  if (type == "webdataset") return MakeWebDatasetSource(options);
  auto bad_log = std::make_shared<BadSampleLog>(options.skip_bad_data);
  std::shared_ptr<const SampleDataset> dataset;
  if (type == "fashion-mnist") {
    dataset = MakeFashionMnistDataset(options);
  } else if (type == "csv") {
    dataset = MakeCsvDataset(options, *bad_log);
  } else if (type == "synthetic") {
    dataset = MakeSyntheticDataset(options);
  } else {
    throw std::runtime_error("data: unknown dataset type '" + type +
                             "' (expected fashion-mnist, csv, webdataset or synthetic)");
  }
  return MakeIndexedBatchSource(std::move(dataset), options, std::move(bad_log));
}

}  // namespace dtrain::clip
