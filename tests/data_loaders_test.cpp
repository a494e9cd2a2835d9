// Every loader on real data: Fashion-MNIST exported to PNG+CSV and to WebDataset shards, read
// back and compared with the idx files; bad data skipped with a count or fatal; several ranks.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "runtime/data/data_source.h"
#include "runtime/data/export_data.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/tar_archive.h"

namespace dtrain::clip {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kExported = 300;
constexpr size_t kPixels = 28 * 28;

// One temporary folder with the test split's first 300 images in both formats, shared by the
// tests of this file.
class ExportedData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/dtrain-data-test-XXXXXX";
    root_ = new std::string(mkdtemp(pattern));
    ExportOptions options;
    options.split = "test";
    options.limit = kExported;
    options.format = "csv";
    options.out_dir = *root_ + "/csv";
    csv_ = new ExportSummary(ExportFashionMnist(options));
    options.format = "webdataset";
    options.out_dir = *root_ + "/wds";
    options.shard_size = 50;
    wds_ = new ExportSummary(ExportFashionMnist(options));
    reference_ = new FashionMnistImages(LoadFashionMnistTest("", 1, 28, kExported));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete csv_;
    delete wds_;
    delete reference_;
  }

  static DataOptions Options(const std::string& type, const std::string& data) {
    DataOptions o;
    o.dataset_type = type;
    o.train_data = data;
    o.batch_size = 32;
    o.workers = 2;
    o.prefetch = 4;
    o.drop_last = false;
    o.seed = 7;
    return o;
  }

  struct Sample {
    std::vector<float> pixels;
    std::string caption;
    int label;
    int64_t index;
  };
  static std::vector<Sample> Epoch(BatchSource& source, int epoch) {
    source.StartEpoch(epoch);
    std::vector<Sample> samples;
    HostBatch batch;
    while (source.Next(batch)) {
      const size_t per = static_cast<size_t>(batch.channels) * batch.height * batch.width;
      EXPECT_EQ(batch.pixels.size(), static_cast<size_t>(batch.size) * per);
      EXPECT_EQ(batch.captions.size(), static_cast<size_t>(batch.size));
      for (int64_t i = 0; i < batch.size; ++i) {
        samples.push_back({std::vector<float>(batch.pixels.begin() + i * per,
                                              batch.pixels.begin() + (i + 1) * per),
                           batch.captions[i], batch.labels[i], batch.indices[i]});
      }
    }
    return samples;
  }

  // The exported sample whose pixels these are (-1: none).
  static int64_t Find(const std::vector<float>& pixels) {
    for (int64_t i = 0; i < kExported; ++i) {
      if (std::equal(pixels.begin(), pixels.end(), reference_->pixels.begin() + i * kPixels)) {
        return i;
      }
    }
    return -1;
  }

  static std::string* root_;
  static ExportSummary* csv_;
  static ExportSummary* wds_;
  static FashionMnistImages* reference_;
};
std::string* ExportedData::root_;
ExportSummary* ExportedData::csv_;
ExportSummary* ExportedData::wds_;
FashionMnistImages* ExportedData::reference_;

TEST_F(ExportedData, ExportWritesTheFilesItReports) {
  EXPECT_EQ(csv_->samples, kExported);
  EXPECT_EQ(csv_->files, kExported);
  EXPECT_TRUE(fs::exists(csv_->train_data));
  EXPECT_EQ(wds_->files, 6);
  EXPECT_EQ(wds_->train_data, *root_ + "/wds/fashion-mnist-test-{0000..0005}.tar");
  EXPECT_TRUE(fs::exists(*root_ + "/wds/fashion-mnist-test-0005.tar"));
}

TEST_F(ExportedData, CsvLoaderReturnsTheExportedPixelsAndCaptions) {
  auto source = MakeBatchSource(Options("csv", csv_->train_data));
  EXPECT_EQ(source->BatchesPerEpoch(), (kExported + 31) / 32);
  std::vector<Sample> samples = Epoch(*source, 0);
  ASSERT_EQ(static_cast<int64_t>(samples.size()), kExported);
  std::set<int64_t> seen;
  for (const Sample& s : samples) {
    ASSERT_TRUE(s.index >= 0 && s.index < kExported);
    EXPECT_TRUE(seen.insert(s.index).second);
    EXPECT_TRUE(std::equal(s.pixels.begin(), s.pixels.end(),
                           reference_->pixels.begin() + s.index * kPixels))
        << "sample " << s.index;
    EXPECT_EQ(s.caption, FashionMnistCaption(reference_->labels[s.index], s.index));
    EXPECT_EQ(s.label, -1);
  }
  EXPECT_EQ(source->SkippedSamples(), 0);
}

TEST_F(ExportedData, WebDatasetLoaderReturnsEverySampleOnce) {
  DataOptions options = Options("webdataset", wds_->train_data);
  options.shuffle_buffer = 64;
  auto source = MakeBatchSource(options);
  EXPECT_EQ(source->BatchesPerEpoch(), -1);
  std::vector<Sample> samples = Epoch(*source, 0);
  ASSERT_EQ(static_cast<int64_t>(samples.size()), kExported);
  std::set<int64_t> seen;
  bool shuffled = false;
  for (size_t k = 0; k < samples.size(); ++k) {
    const int64_t i = Find(samples[k].pixels);
    ASSERT_GE(i, 0) << "pixels of sample " << k << " are not in the export";
    seen.insert(i);
    shuffled = shuffled || (k > 0 && Find(samples[k - 1].pixels) + 1 != i);
    EXPECT_EQ(samples[k].label, reference_->labels[i]);
    EXPECT_EQ(samples[k].caption, FashionMnistCaption(reference_->labels[i], i));
  }
  EXPECT_GE(seen.size(), static_cast<size_t>(kExported) - 2);  // Fashion-MNIST has rare duplicates
  EXPECT_TRUE(shuffled);
}

TEST_F(ExportedData, FashionMnistLoaderMatchesTheIdxFiles) {
  DataOptions options = Options("fashion-mnist", "");
  options.train_num_samples = 256;
  options.drop_last = true;
  auto source = MakeBatchSource(options);
  FashionMnistSplit train = LoadFashionMnist("", "train");
  std::vector<Sample> samples = Epoch(*source, 1);
  ASSERT_EQ(samples.size(), 256u);
  for (const Sample& s : samples) {
    for (size_t p = 0; p < kPixels; p += 37) {
      ASSERT_NEAR(s.pixels[p] * kFashionMnistStd + kFashionMnistMean,
                  train.pixels[s.index * kPixels + p] / 255.0f, 1e-5);
    }
    EXPECT_EQ(s.label, train.labels[s.index]);
    EXPECT_NE(s.caption.find(FashionMnistClassNames()[s.label]), std::string::npos) << s.caption;
  }
}

TEST_F(ExportedData, RanksGetEqualDisjointSharesThroughTheLoader) {
  std::set<int64_t> all;
  size_t per_rank = 0;
  for (int rank = 0; rank < 3; ++rank) {
    DataOptions options = Options("csv", csv_->train_data);
    options.rank = rank;
    options.world_size = 3;
    options.drop_last = true;
    options.batch_size = 20;
    auto source = MakeBatchSource(options);
    std::vector<Sample> samples = Epoch(*source, 2);
    if (rank == 0) per_rank = samples.size();
    EXPECT_EQ(samples.size(), per_rank);
    for (const Sample& s : samples) EXPECT_TRUE(all.insert(s.index).second) << "overlap";
  }
  EXPECT_EQ(per_rank, 100u);
  EXPECT_EQ(all.size(), static_cast<size_t>(kExported));
}

TEST_F(ExportedData, WebDatasetRanksRunTheSameNumberOfBatches) {
  for (int rank = 0; rank < 2; ++rank) {
    DataOptions options = Options("webdataset", wds_->train_data);
    options.rank = rank;
    options.world_size = 2;
    options.workers = 3;
    options.train_num_samples = 1000;  // more than one pass: shards are read again
    auto source = MakeBatchSource(options);
    EXPECT_EQ(source->BatchesPerEpoch(), 1000 / (2 * 32));
    std::vector<Sample> samples = Epoch(*source, 0);
    EXPECT_EQ(samples.size(), static_cast<size_t>(1000 / (2 * 32) * 32));
  }
  DataOptions options = Options("webdataset", wds_->train_data);
  options.world_size = 2;
  EXPECT_THROW(MakeBatchSource(options), std::runtime_error) << "needs train_num_samples";
  options.train_num_samples = 1000;
  options.workers = 4;
  EXPECT_THROW(MakeBatchSource(options), std::runtime_error) << "6 shards < 2 ranks x 4 loaders";
}

TEST_F(ExportedData, CsvBadRowsAndImagesAreSkippedWithFileAndLineOrFatal) {
  const std::string dir = *root_ + "/csv";
  std::vector<uint8_t> png_bytes;
  {
    std::ifstream in(dir + "/images/000000.png", std::ios::binary);
    png_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(dir + "/images/corrupt.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png_bytes.data()), 40);
  const std::string csv = dir + "/bad.csv";
  std::ofstream(csv) << "filepath\ttitle\n"
                     << "images/000001.png\t\"a photo, \"\"quoted\"\"\"\n"  // line 2: fine
                     << "images/missing.png\ta photo of a bag.\n"           // line 3: no file
                     << "images/corrupt.png\ta photo of a coat.\n"          // line 4: corrupt
                     << "images/000002.png\tone\ttoo many\n"                // line 5: 3 fields
                     << "images/000003.png\ta photo of a dress.\n";         // line 6: fine
  DataOptions options = Options("csv", csv);
  options.batch_size = 2;
  options.workers = 1;
  testing::internal::CaptureStderr();
  auto source = MakeBatchSource(options);
  std::vector<Sample> samples = Epoch(*source, 0);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(source->SkippedSamples(), 3);
  EXPECT_NE(log.find(csv + ":5: 3 fields, expected 2"), std::string::npos) << log;
  EXPECT_NE(log.find(csv + ":3: " + dir + "/images/missing.png: cannot open"), std::string::npos)
      << log;
  EXPECT_NE(log.find(csv + ":4: " + dir + "/images/corrupt.png: corrupt PNG"), std::string::npos)
      << log;
  // Bad samples are replaced by good ones: the batches stay full.
  ASSERT_EQ(samples.size(), 4u);
  std::set<std::string> captions;
  for (const Sample& s : samples) captions.insert(s.caption);
  EXPECT_EQ(captions, (std::set<std::string>{"a photo, \"quoted\"", "a photo of a dress."}));

  options.skip_bad_data = false;
  try {
    auto strict = MakeBatchSource(options);
    Epoch(*strict, 0);
    FAIL() << "expected a fatal error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(csv + ":5: 3 fields"), std::string::npos) << e.what();
  }
  std::ofstream(csv) << "path\tcaption\nimages/000001.png\tx\n";
  try {
    MakeBatchSource(Options("csv", csv));
    FAIL() << "expected an error for the missing column";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(csv + ":1: no column 'filepath'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(MakeBatchSource(Options("csv", dir + "/none.csv")), std::runtime_error);
}

TEST_F(ExportedData, TruncatedAndMissingShardsAreReportedWithTheirPath) {
  const std::string dir = *root_ + "/wds-bad";
  fs::create_directories(dir);
  for (int s = 0; s < 2; ++s) {
    fs::copy_file(*root_ + "/wds/fashion-mnist-test-000" + std::to_string(s) + ".tar",
                  dir + "/s-" + std::to_string(s) + ".tar", fs::copy_options::overwrite_existing);
  }
  const std::string cut = dir + "/s-1.tar";
  fs::resize_file(cut, fs::file_size(cut) / 2 + 100);                  // mid-member
  DataOptions options = Options("webdataset", dir + "/s-{0..2}.tar");  // s-2.tar is missing
  options.workers = 1;
  testing::internal::CaptureStderr();
  auto source = MakeBatchSource(options);
  std::vector<Sample> samples = Epoch(*source, 0);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(source->SkippedSamples(), 2);
  EXPECT_NE(log.find(cut + ": truncated tar"), std::string::npos) << log;
  EXPECT_NE(log.find(dir + "/s-2.tar: cannot open"), std::string::npos) << log;
  // All of shard 0 and the part of shard 1 before the cut.
  EXPECT_GT(samples.size(), 50u);
  EXPECT_LT(samples.size(), 100u);
  for (const Sample& s : samples) EXPECT_GE(Find(s.pixels), 0);

  options.skip_bad_data = false;
  try {
    auto strict = MakeBatchSource(options);
    Epoch(*strict, 0);
    FAIL() << "expected a fatal error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find(cut) != std::string::npos || what.find("s-2.tar") != std::string::npos)
        << what;
  }
}

TEST(Loaders, CsvReadsJpegAndRgbImagesIntoTheModelsLayout) {
  char pattern[] = "/tmp/dtrain-jpeg-test-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  // A 64x48 RGB photo-like image: red left half, blue right half.
  Image image{64, 48, 3, {}};
  for (int y = 0; y < 48; ++y) {
    for (int x = 0; x < 64; ++x) {
      const bool left = x < 32;
      image.data.insert(image.data.end(), {uint8_t(left ? 220 : 20), 30, uint8_t(left ? 20 : 220)});
    }
  }
  WriteFileBytes(dir + "/photo.jpg", EncodeJpeg(image, 95));
  // As a spreadsheet writes it: a byte-order mark and CRLF line ends.
  std::ofstream(dir + "/data.csv")
      << "\xef\xbb\xbftitle,filepath\r\n\"red, then blue\"," << dir << "/photo.jpg\r\n";
  DataOptions options;
  options.dataset_type = "csv";
  options.train_data = dir + "/data.csv";
  options.csv_separator = ",";
  options.channels = 3;
  options.image_size = 32;
  options.batch_size = 1;
  auto source = MakeBatchSource(options);
  HostBatch batch;
  ASSERT_TRUE(source->Next(batch));
  EXPECT_EQ(batch.captions[0], "red, then blue");
  ASSERT_EQ(batch.pixels.size(), 3u * 32 * 32);
  const Normalization n = NormalizationFor(3);
  auto value = [&](int c, int y, int x) {
    return (batch.pixels[(c * 32 + y) * 32 + x] * n.std[c] + n.mean[c]) * 255;
  };
  EXPECT_NEAR(value(0, 16, 4), 220, 8);  // red on the left
  EXPECT_NEAR(value(2, 16, 4), 20, 8);
  EXPECT_NEAR(value(0, 16, 28), 20, 8);  // blue on the right
  EXPECT_NEAR(value(2, 16, 28), 220, 8);
  fs::remove_all(dir);
}

// export-data for a 224x224 RGB model: each file is the stored image resized and on three
// channels, as JPEG; the webdataset loader reads the .jpg shards at the model's size.
TEST(Loaders, ExportedJpegsAreTheStoredImagesResizedToRgb) {
  char pattern[] = "/tmp/dtrain-export-jpeg-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  ExportOptions options;
  options.split = "test";
  options.limit = 12;
  options.image_size = 224;
  options.channels = 3;
  options.image_format = "jpeg";
  options.format = "csv";
  options.out_dir = dir + "/csv";
  EXPECT_EQ(ExportFashionMnist(options).files, 12);
  const FashionMnistSplit stored = LoadFashionMnist("", "test");
  for (int64_t i : {0, 11}) {
    char name[32];
    std::snprintf(name, sizeof name, "/csv/images/%06lld.jpg", static_cast<long long>(i));
    const std::vector<uint8_t> file = ReadFileBytes(dir + name);
    const Image got = DecodeImage(file.data(), file.size(), name);
    ASSERT_EQ(got.width, 224);
    ASSERT_EQ(got.height, 224);
    ASSERT_EQ(got.channels, 3);
    const auto* first = &stored.pixels[static_cast<size_t>(i) * kPixels];
    const Image want = ResizeBilinear(
        ConvertChannels(Image{28, 28, 1, std::vector<uint8_t>(first, first + kPixels)}, 3), 224,
        224);
    double diff = 0;
    for (size_t k = 0; k < want.data.size(); ++k) diff += std::abs(got.data[k] - want.data[k]);
    EXPECT_LT(diff / static_cast<double>(want.data.size()), 2.0) << name << ": mean |difference|";
  }
  options.format = "webdataset";
  options.out_dir = dir + "/wds";
  options.shard_size = 5;
  const ExportSummary shards = ExportFashionMnist(options);
  EXPECT_EQ(shards.files, 3);
  DataOptions o;
  o.dataset_type = "webdataset";
  o.train_data = shards.train_data;
  o.channels = 3;
  o.image_size = 224;
  o.batch_size = 4;
  o.drop_last = false;
  auto source = MakeBatchSource(o);
  source->StartEpoch(0);
  HostBatch batch;
  int64_t read = 0;
  while (source->Next(batch)) {
    EXPECT_EQ(batch.pixels.size(), static_cast<size_t>(batch.size) * 3 * 224 * 224);
    read += batch.size;
  }
  EXPECT_EQ(read, 12);
  EXPECT_EQ(source->SkippedSamples(), 0);
  options.image_format = "gif";
  EXPECT_THROW(ExportFashionMnist(options), std::runtime_error);
  fs::remove_all(dir);
}

TEST(Loaders, WebDatasetOfUndecodableImagesFailsInsteadOfCyclingForever) {
  char pattern[] = "/tmp/dtrain-wds-test-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  TarWriter tar(dir + "/bad-0.tar");
  for (int i = 0; i < 10; ++i) {
    tar.Add(std::to_string(i) + ".png", {'n', 'o', 't', ' ', 'p', 'n', 'g'});
    tar.Add(std::to_string(i) + ".txt", {'x'});
  }
  tar.Finish();
  DataOptions options;
  options.dataset_type = "webdataset";
  options.train_data = dir + "/bad-{0..0}.tar";
  options.batch_size = 4;
  options.shuffle_buffer = 4;
  options.train_num_samples = 100;  // cycle through the shard as often as needed
  testing::internal::CaptureStderr();
  auto source = MakeBatchSource(options);
  HostBatch batch;
  EXPECT_THROW(source->Next(batch), std::runtime_error);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find(dir + "/bad-0.tar:3.png: not a PNG or JPEG image"), std::string::npos) << log;
  // Each bad image counted once, not once per pass (one may never have left the buffer).
  EXPECT_GE(source->SkippedSamples(), 6);
  EXPECT_LE(source->SkippedSamples(), 10);
  fs::remove_all(dir);
}

TEST(Loaders, SyntheticBatchesAreShapedAndRepeatable) {
  DataOptions options;
  options.dataset_type = "synthetic";
  options.channels = 3;
  options.image_size = 32;
  options.batch_size = 16;
  options.train_num_samples = 64;
  auto a = MakeBatchSource(options);
  auto b = MakeBatchSource(options);
  EXPECT_EQ(a->BatchesPerEpoch(), 4);
  HostBatch x, y;
  ASSERT_TRUE(a->Next(x));
  ASSERT_TRUE(b->Next(y));
  EXPECT_EQ(x.pixels.size(), 16u * 3 * 32 * 32);
  EXPECT_EQ(x.pixels, y.pixels);
  EXPECT_EQ(x.captions, y.captions);
  float lo = 0, hi = 0;
  for (float v : x.pixels) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_LT(lo, -1.5f);
  EXPECT_GT(hi, 1.5f);
  options.dataset_type = "imagenet";
  EXPECT_THROW(MakeBatchSource(options), std::runtime_error);
}

TEST(Loaders, StopMidEpochAndRestartDoNotHang) {
  DataOptions options;
  options.dataset_type = "synthetic";
  options.batch_size = 8;
  options.workers = 3;
  options.prefetch = 2;
  options.train_num_samples = 4096;
  auto source = MakeBatchSource(options);
  HostBatch batch;
  std::vector<int64_t> first;
  for (int epoch = 0; epoch < 3; ++epoch) {
    source->StartEpoch(epoch);
    ASSERT_TRUE(source->Next(batch));
    if (epoch == 0) first = batch.indices;
  }
  source->StartEpoch(0);
  ASSERT_TRUE(source->Next(batch));
  EXPECT_EQ(batch.indices, first) << "an epoch's order does not depend on what came before";
  source.reset();  // destroyed with workers blocked on a full queue
}

}  // namespace
}  // namespace dtrain::clip
