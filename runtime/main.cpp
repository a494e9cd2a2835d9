// dtrain-clip: the bundled CLIP trainer. `train` runs training (trainer.cpp), `export-data`
// writes Fashion-MNIST as CSV+PNG or WebDataset shards. Turns errors into exit codes: 2 for a
// bad command line, 1 for anything else.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/distributed_train_collectives.h"
#include "runtime/export_data.h"
#include "runtime/train_collectives.h"
#include "runtime/train_options.h"
#include "runtime/trainer.h"
#include "runtime/version.h"

namespace {

using dtrain::clip::UsageError;

const char* kUsage = R"(Usage: dtrain-clip COMMAND [FLAGS]

A CLIP trainer in C++ on LibTorch (OpenCLIP's model, loss and flags).

Commands:
  train         train a CLIP model (default: fmnist-tiny on Fashion-MNIST); see train --help
  export-data   write Fashion-MNIST as CSV+PNG or WebDataset tar shards; see export-data --help
Flags:
  --version     print the version
  --help        this text
)";

const char* kExportUsage = R"(Usage: dtrain-clip export-data --format csv|webdataset --out DIR [FLAGS]

Writes Fashion-MNIST (real images, captions from the templates) in the formats that
`dtrain-clip train --dataset-type csv|webdataset` reads, and prints the --train-data value.

  --format csv|webdataset   PNG files + a tab-separated CSV (filepath, title), or tar shards
  --out DIR                 output directory (created)
  --split train|test        which split (train)
  --limit N                 first N samples (0: all)
  --shard-size N            samples per tar shard (1000)
  --source DIR              Fashion-MNIST idx files (default: Debian's location)
)";

int64_t ParseCount(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    long long v = std::stoll(value, &used);
    if (used == value.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(flag + ": expected a count >= 0, got '" + value + "'");
}

int ExportData(const std::vector<std::string>& args) {
  dtrain::clip::ExportOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kExportUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (see export-data --help)");
    const std::string& value = args[++i];
    if (flag == "--format") {
      if (value != "csv" && value != "webdataset") throw UsageError("--format: csv or webdataset");
      options.format = value;
    } else if (flag == "--out") {
      options.out_dir = value;
    } else if (flag == "--split") {
      if (value != "train" && value != "test") throw UsageError("--split: train or test");
      options.split = value;
    } else if (flag == "--limit") {
      options.limit = ParseCount(flag, value);
    } else if (flag == "--shard-size") {
      options.shard_size = ParseCount(flag, value);
    } else if (flag == "--source") {
      options.source_dir = value;
    } else {
      throw UsageError("unknown flag '" + flag + "' (see dtrain-clip export-data --help)");
    }
  }
  if (options.out_dir.empty()) throw UsageError("export-data needs --out DIR");
  auto summary = dtrain::clip::ExportFashionMnist(options);
  std::printf("wrote %lld samples in %lld files\n--train-data %s\n",
              static_cast<long long>(summary.samples), static_cast<long long>(summary.files),
              summary.train_data.c_str());
  return 0;
}

int Train(const std::vector<std::string>& args) {
  bool help = false;
  dtrain::clip::TrainOptions options = dtrain::clip::ParseTrainFlags(args, &help);
  if (help) {
    std::fputs(dtrain::clip::TrainHelpText(), stdout);
    return 0;
  }
  // One process, or a rank of a job (RANK/WORLD_SIZE, HOROVOD_*, OMPI_*, PMI_*, SLURM_*).
  auto collectives = dtrain::clip::MakeTrainCollectives(options);
  return dtrain::clip::RunTraining(options, *collectives);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::fputs(kUsage, stdout);
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      std::printf("dtrain-clip %s\n", dtrain::clip::ClipVersion());
      return 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "train") return Train(rest);
    if (args[0] == "export-data") return ExportData(rest);
    throw UsageError("unknown command '" + args[0] + "' (commands: train, export-data)");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dtrain-clip: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain-clip: error: %s\n", e.what());
    return 1;
  }
}
