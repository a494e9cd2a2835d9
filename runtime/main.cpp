// dtrain-clip: the bundled CLIP trainer. `train` runs training (trainer.cpp), `export-data`
// writes Fashion-MNIST as CSV+PNG or WebDataset shards, `export-weights` writes a checkpoint's
// weights for OpenCLIP, `check` compares the step's computations on a device with references.
// Turns errors into exit codes: 2 for a bad command line, 1 for anything else.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/cuda.h>

#include "runtime/config/completion_script.h"
#include "runtime/config/model_config.h"
#include "runtime/config/train_options.h"
#include "runtime/data/export_data.h"
#include "runtime/dist/distributed.h"
#include "runtime/dist/distributed_train_collectives.h"
#include "runtime/dist/job_store_server.h"
#include "runtime/dist/link_bandwidth.h"
#include "runtime/dist/rank_device.h"
#include "runtime/dist/train_collectives.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/open_clip_weights.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/device_checks.h"
#include "runtime/train/device_speed.h"
#include "runtime/train/stop_signals.h"
#include "runtime/train/trainer.h"
#include "runtime/version.h"

namespace {

using dtrain::clip::UsageError;

const char* kUsage = R"(Usage: dtrain-clip COMMAND [FLAGS]

A CLIP trainer in C++ on LibTorch (OpenCLIP's model, loss and flags).

Commands:
  train         train a CLIP model (default: fmnist-tiny on Fashion-MNIST); see train --help
  export-data   write Fashion-MNIST as CSV+PNG or WebDataset tar shards; see export-data --help
  export-weights  write a checkpoint's weights under OpenCLIP's names (.safetensors)
  bandwidth     allreduce bus bandwidth of every rank, of node pairs and within nodes (what
                `dtrain doctor --bandwidth` runs on every node); see bandwidth --help
  store         serve a job's TCPStore: --host H --port P (what dtrain launch starts on
                node 0 so that every rank is a client; until SIGTERM)
  check         run the training step's computations on a device against references (attention,
                patch embedding, LayerNorm, captured step); see check --help
  completion    print a bash, zsh or fish completion script; see completion --help
Flags:
  --version     print the version
  --help        this text
)";

const char* kExportUsage =
    R"(Usage: dtrain-clip export-data --format csv|webdataset --out DIR [FLAGS]

Writes Fashion-MNIST (real images, captions from the templates) in the formats that
`dtrain-clip train --dataset-type csv|webdataset` reads, and prints the --train-data value.

  --format csv|webdataset   PNG files + a tab-separated CSV (filepath, title), or tar shards
  --out DIR                 output directory (created)
  --split train|test        which split (train)
  --limit N                 first N samples (0: all)
  --shard-size N            samples per tar shard (1000)
  --source DIR              Fashion-MNIST idx files (default: Debian's location)
  --image-size N            side of the written images, resized from 28 (28)
  --channels 1|3            grey as stored, or RGB (the grey on all three) (1)
  --image-format png|jpeg   how each image is encoded (png; jpeg: quality 90)
)";

const char* kCheckUsage = R"(Usage: dtrain-clip check [--device cpu|cuda|cuda:N|auto]

Runs the computations of dtrain-clip's training step on the device and compares each with a
reference, one line each (PASS or FAIL, what was compared, the difference and its limit); exits
1 if any fails. Run it on a new machine, or after a new LibTorch, CUDA driver or GPU:
  attention          the step's attention (SDPA in bfloat16 on CUDA, the fused float32 kernel
                     on the CPU), plain and causal, against matmul and softmax in float32
  patch-embedding    the patch embedding as one matrix product against the convolution
  linear-rows        a linear layer as one autograd node against addmm over the rows
  fused-bias-grad    a linear layer's weight and bias gradients from one cuBLASLt product
                     (--fused-bias-grad) against the product and the sum over the rows (on
                     the CPU: that it declines, being CUDA's)
  layer-norm         a step's LayerNorms get 16-byte aligned weights, and on CUDA run ATen's
                     vectorised kernel
  weight-copies      three bf16 steps with the matrix weights' bfloat16 copies against the
                     same steps with autocast's cast of each weight at its use
  captured-step      three steps captured as a CUDA graph and replayed (on the CPU: replayed
                     from static buffers) against the same steps run eagerly
  captured-lengths   the same over text cut to 16 and 24 positions in turn: a graph each,
                     sharing one memory pool
Then how fast the device is, one SPEED line each (the fastest of 10 runs), for dtrain doctor
--compute to compare with the other devices: matmul (bfloat16 8192 x 8192 on CUDA, float32
1024 x 1024 on the CPU), memory-copy within the device, and on CUDA host-to-device from pinned
memory.

  --device cpu|cuda|cuda:N|auto   where to run (cpu); cuda alone: cuda:LOCAL_RANK, as for
                                  train; auto: cuda where a GPU is visible, else cpu
)";

const char* kCompletionUsage = R"(Usage: dtrain-clip completion bash|zsh|fish

Prints a completion script for the shell: dtrain-clip's commands, each command's flags as its
--help lists them, the values of flags that take one of a few, and file names elsewhere.
  source <(dtrain-clip completion bash)      source <(dtrain-clip completion zsh)
  dtrain-clip completion fish | source
`cmake --install` puts the three where bash-completion, zsh and fish look.
)";

const char* kExportWeightsUsage =
    R"(Usage: dtrain-clip export-weights --checkpoint FILE --out FILE.safetensors [FLAGS]

Writes the model weights of a dtrain-clip checkpoint (epoch_N.pt) as float32 safetensors under
OpenCLIP's state_dict names, so that
  open_clip.create_model(<same architecture>, pretrained="FILE.safetensors")
loads them. A 1-channel model (fmnist-tiny) is written with OpenCLIP's 3-channel patch
embedding: feed it the grey image on all three channels.

  --checkpoint FILE         a checkpoint dtrain-clip train wrote
  --out FILE.safetensors    where to write (atomically)
  --format open_clip        the only format (default)
  --model NAME              preset (default: the model the checkpoint names)
  --model-config FILE       an OpenCLIP model-config JSON instead of a preset
)";

const char* kBandwidthUsage = R"(Usage: dtrain-clip bandwidth [FLAGS]

Run as every rank of a job (dtrain launch, one rank per node, or one per GPU): measures the
allreduce bus bandwidth (nccl-tests' busbw = algbw * 2(n-1)/n) of all ranks together, within each
node when a node has several ranks, and between pairs of nodes (each node against two others),
with the job's backend. Prints one line per figure, "dtrain-bandwidth {json}", from the lowest
rank of each group; `dtrain doctor --bandwidth` reads them and names the slow node or link.

  --size-mib N              MiB per allreduce (8)
  --iterations N            timed allreduces per figure, after one warm-up; the fastest
                            counts (5)
  --no-pairs                skip the pairwise rounds
  --dist-backend gloo|nccl  default: nccl when a GPU is visible, else gloo
)";

const char* kStoreUsage = R"(Usage: dtrain-clip store --host H --port P

Serves a job's TCPStore (LibTorch's own server, so its protocol is the ranks') on port P until
SIGTERM, SIGINT or SIGHUP, and prints "dtrain-job-store-ready P" once it listens. `dtrain launch` starts it on the job's
first node; the ranks, told TORCHELASTIC_USE_AGENT_STORE=True, connect as clients, so no rank's
exit takes the store from the others, and it outlives every rank of an attempt.

  --host H   the address to listen on (the job's MASTER_ADDR)
  --port P   the port (the job's MASTER_PORT)
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
    } else if (flag == "--image-size") {
      const int64_t size = ParseCount(flag, value);
      if (size < 1 || size > 4096) throw UsageError("--image-size: 1 to 4096 pixels");
      options.image_size = static_cast<int>(size);
    } else if (flag == "--channels") {
      if (value != "1" && value != "3") throw UsageError("--channels: 1 or 3");
      options.channels = value == "1" ? 1 : 3;
    } else if (flag == "--image-format") {
      if (value != "png" && value != "jpeg") throw UsageError("--image-format: png or jpeg");
      options.image_format = value;
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

int ExportWeights(const std::vector<std::string>& args) {
  std::string checkpoint, out, model, model_config;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kExportWeightsUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (see export-weights --help)");
    const std::string& value = args[++i];
    if (flag == "--checkpoint") {
      checkpoint = value;
    } else if (flag == "--out") {
      out = value;
    } else if (flag == "--format") {
      if (value != "open_clip") throw UsageError("--format: only open_clip is written");
    } else if (flag == "--model") {
      model = value;
    } else if (flag == "--model-config") {
      model_config = value;
    } else {
      throw UsageError("unknown flag '" + flag + "' (see dtrain-clip export-weights --help)");
    }
  }
  if (checkpoint.empty() || out.empty()) {
    throw UsageError("export-weights needs --checkpoint FILE and --out FILE.safetensors");
  }
  if (model.empty() && model_config.empty()) model = dtrain::clip::CheckpointModelName(checkpoint);
  const bool is_config_file = !model_config.empty() || model.find(".json") != std::string::npos;
  auto config = is_config_file
                    ? dtrain::clip::LoadModelConfig(model_config.empty() ? model : model_config)
                    : dtrain::clip::PresetModelConfig(model);
  dtrain::clip::ClipModel clip(config);
  dtrain::clip::LoadCheckpointWeights(checkpoint, *clip);
  dtrain::clip::ExportOpenClipWeights(clip, out);
  std::printf("wrote %s (%lld parameters, OpenCLIP names)\n", out.c_str(),
              static_cast<long long>(dtrain::clip::ParameterCount(*clip)));
  return 0;
}

int Bandwidth(const std::vector<std::string>& args) {
  dtrain::clip::LinkBandwidthOptions options;
  dtrain::clip::DistributedOptions dist_options;
  dist_options.rendezvous_timeout = std::chrono::minutes(2);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kBandwidthUsage, stdout);
      return 0;
    }
    if (flag == "--no-pairs") {
      options.pairs = false;
      continue;
    }
    if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (see bandwidth --help)");
    const std::string& value = args[++i];
    if (flag == "--size-mib") {
      options.bytes = std::max<int64_t>(1, ParseCount(flag, value)) << 20;
    } else if (flag == "--iterations") {
      options.iterations = static_cast<int>(std::max<int64_t>(1, ParseCount(flag, value)));
    } else if (flag == "--dist-backend") {
      if (value != "gloo" && value != "nccl") throw UsageError("--dist-backend: gloo or nccl");
      dist_options.backend = value;
    } else {
      throw UsageError("unknown flag '" + flag + "' (see dtrain-clip bandwidth --help)");
    }
  }
  dtrain::clip::Distributed dist(dtrain::clip::ReadDistEnvFromProcess(), dist_options);
  dtrain::clip::RunLinkBandwidth(dist, options, stdout);
  return 0;
}

int Train(const std::vector<std::string>& args) {
  bool help = false;
  dtrain::clip::TrainOptions options = dtrain::clip::ParseTrainFlags(args, &help);
  if (help) {
    std::fputs(dtrain::clip::TrainHelpText(), stdout);
    return 0;
  }
  // Before any thread starts: they all leave SIGTERM, SIGINT and SIGUSR1 to its thread.
  dtrain::clip::StopSignals* signals =
      options.save_on_signal ? &dtrain::clip::StopSignals::Install() : nullptr;
  int status = 0;
  {
    // One process, or a rank of a job (RANK/WORLD_SIZE, HOROVOD_*, OMPI_*, PMI_*, SLURM_*).
    auto collectives = dtrain::clip::MakeTrainCollectives(options);
    status = dtrain::clip::RunTraining(options, *collectives);
  }
  // Stopped on a signal: the process ends by it, as a supervisor that sent it expects.
  if (signals && signals->end_signal() != 0) {
    dtrain::clip::StopSignals::EndBy(signals->end_signal());
  }
  return status;
}

// `check [--device D]`: runtime/train/device_checks.h.
int Check(const std::vector<std::string>& args) {
  std::string device_name = "cpu";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kCheckUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (see check --help)");
    const std::string& value = args[++i];
    if (flag != "--device") throw UsageError("unknown flag '" + flag + "' (see check --help)");
    if (value != "cpu" && value != "cuda" && value != "auto" && value.rfind("cuda:", 0) != 0)
      throw UsageError("--device: expected cpu, cuda, cuda:N or auto, got '" + value + "'");
    device_name = value;
  }
  if (device_name == "auto") device_name = torch::cuda::is_available() ? "cuda" : "cpu";
  // "cuda" alone: the local rank's GPU, as for train (dtrain doctor --compute runs a rank a GPU).
  const torch::Device device = dtrain::clip::RankDevice(device_name);
  const std::string model = dtrain::clip::DeviceModel(device);
  std::printf("dtrain-clip check on %s%s\n", device.str().c_str(),
              model.empty() ? "" : (" (" + model + ")").c_str());
  std::fflush(stdout);
  int failed = 0;
  for (const auto& check : dtrain::clip::RunDeviceChecks(device)) {
    std::printf("%s  %-17s %s\n", check.passed ? "PASS" : "FAIL", check.name.c_str(),
                check.detail.c_str());
    std::fflush(stdout);
    failed += check.passed ? 0 : 1;
  }
  std::printf(failed ? "%d check(s) failed\n" : "every check passed\n", failed);
  // How fast the device is, for a comparison with its peers (dtrain doctor --compute).
  try {
    for (const auto& speed : dtrain::clip::MeasureDeviceSpeed(device)) {
      std::printf("SPEED  %-15s %.4g %s (%s)\n", speed.name.c_str(), speed.value,
                  speed.unit.c_str(), speed.detail.c_str());
    }
  } catch (const std::exception& e) {
    std::printf("the speed could not be measured: %s\n", e.what());
  }
  std::fflush(stdout);
  return failed ? 1 : 0;
}

// `store --host H --port P`: the job's TCPStore (runtime/dist/job_store_server.h).
int Store(const std::vector<std::string>& args) {
  std::string host;
  int port = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kStoreUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (store --host H --port P)");
    const std::string& value = args[++i];
    if (flag == "--host") {
      host = value;
    } else if (flag == "--port") {
      port = static_cast<int>(ParseCount(flag, value));
    } else {
      throw UsageError("unknown flag '" + flag + "' (store --host H --port P)");
    }
  }
  if (host.empty() || port <= 0 || port > 65535)
    throw UsageError("store needs --host H and --port P (1-65535)");
  return dtrain::clip::ServeJobStore(host, port);
}

// `completion bash|zsh|fish`: runtime/config/completion_script.h, from the usage texts above.
int Completion(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kCompletionUsage, stdout);
    return 0;
  }
  if (args.size() != 1) throw UsageError("completion takes one shell: bash, zsh or fish");
  const std::vector<dtrain::clip::CompletionCommand> commands = {
      {"train", "train a CLIP model", dtrain::clip::TrainHelpText(), {}},
      {"export-data", "write Fashion-MNIST as CSV+PNG or WebDataset shards", kExportUsage, {}},
      {"export-weights",
       "write a checkpoint's weights under OpenCLIP's names",
       kExportWeightsUsage,
       {}},
      {"bandwidth",
       "allreduce bus bandwidth of every rank, node pairs and nodes",
       kBandwidthUsage,
       {}},
      {"store", "serve a job's TCPStore", kStoreUsage, {}},
      {"check", "check the training step's computations on a device", kCheckUsage, {}},
      {"completion", "print a shell completion script", kCompletionUsage, {"bash", "zsh", "fish"}},
  };
  try {
    std::fputs(dtrain::clip::CompletionScript(args[0], "dtrain-clip", commands).c_str(), stdout);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return 0;
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
      std::fputs(dtrain::clip::BuildReport().c_str(), stdout);
      return 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "train") return Train(rest);
    if (args[0] == "export-data") return ExportData(rest);
    if (args[0] == "export-weights") return ExportWeights(rest);
    if (args[0] == "bandwidth") return Bandwidth(rest);
    if (args[0] == "store") return Store(rest);
    if (args[0] == "check") return Check(rest);
    if (args[0] == "completion") return Completion(rest);
    throw UsageError("unknown command '" + args[0] +
                     "' (commands: train, export-data, export-weights, bandwidth, store, check, "
                     "completion)");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dtrain-clip: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain-clip: error: %s\n", e.what());
    return 1;
  }
}
