#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

#include "runtime/config/train_options.h"

namespace dtrain::clip {
namespace {

// Samples per epoch when training on Fashion-MNIST without --train-num-samples: 120 steps of
// 256 on one rank, enough to show learning in minutes (zero-shot top-1 well above chance).
constexpr int64_t kFashionMnistDefaultSamples = 30720;

int64_t ToInt(const std::string& flag, const std::string& value, int64_t min) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno || v < min) {
    throw UsageError(flag + ": expected an integer >= " + std::to_string(min) + ", got '" + value +
                     "'");
  }
  return v;
}

double ToDouble(const std::string& flag, const std::string& value, double min) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || errno || !(v >= min)) {
    throw UsageError(flag + ": expected a number >= " + std::to_string(min) + ", got '" + value +
                     "'");
  }
  return v;
}

std::string OneOf(const std::string& flag, const std::string& value,
                  std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (value == c) return value;
    list += list.empty() ? c : std::string("|") + c;
  }
  throw UsageError(flag + ": expected " + list + ", got '" + value + "'");
}

// --profile-steps: "A" or "A-B", steps from 1.
void SetProfileSteps(TrainOptions& o, const std::string& flag, const std::string& value) {
  const size_t dash = value.find('-');
  o.profile_first = ToInt(flag, value.substr(0, dash), 1);
  o.profile_last =
      dash == std::string::npos ? o.profile_first : ToInt(flag, value.substr(dash + 1), 1);
  if (o.profile_last < o.profile_first) {
    throw UsageError(flag + ": the last step comes before the first in '" + value + "'");
  }
}

// "\t" and "tab" both mean a tab, as shells make a literal tab awkward to pass.
std::string Separator(const std::string& value) {
  if (value == "\\t" || value == "tab" || value == "\t") return "\t";
  if (value.size() != 1)
    throw UsageError("--csv-separator: expected one character, got '" + value + "'");
  return value;
}

using ValueSetter = std::function<void(TrainOptions&, const std::string& flag, const std::string&)>;
using SwitchSetter = std::function<void(TrainOptions&)>;

const std::map<std::string, ValueSetter>& ValueFlags() {
  static const std::map<std::string, ValueSetter> flags = {
      {"--model", [](TrainOptions& o, auto&, auto& v) { o.model = v; }},
      {"--model-config", [](TrainOptions& o, auto&, auto& v) { o.model_config_path = v; }},
      {"--bpe-vocab", [](TrainOptions& o, auto&, auto& v) { o.bpe_vocab = v; }},
      {"--dataset-type",
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.dataset_type = OneOf(f, v, {"fashion-mnist", "csv", "webdataset", "synthetic"});
       }},
      {"--train-data", [](TrainOptions& o, auto&, auto& v) { o.data.train_data = v; }},
      {"--val-data", [](TrainOptions& o, auto&, auto& v) { o.val_data = v; }},
      {"--csv-img-key", [](TrainOptions& o, auto&, auto& v) { o.data.csv_img_key = v; }},
      {"--csv-caption-key", [](TrainOptions& o, auto&, auto& v) { o.data.csv_caption_key = v; }},
      {"--csv-separator",
       [](TrainOptions& o, auto&, auto& v) { o.data.csv_separator = Separator(v); }},
      {"--train-num-samples",
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.train_num_samples = ToInt(f, v, 0);
         o.train_num_samples_given = true;
       }},
      {"--batch-size", [](TrainOptions& o, auto& f,
                          auto& v) { o.data.batch_size = static_cast<int>(ToInt(f, v, 1)); }},
      {"--workers", [](TrainOptions& o, auto& f,
                       auto& v) { o.data.workers = static_cast<int>(ToInt(f, v, 1)); }},
      {"--bad-data",
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.skip_bad_data = OneOf(f, v, {"skip", "fatal"}) == "skip";
       }},
      {"--epochs",
       [](TrainOptions& o, auto& f, auto& v) { o.epochs = static_cast<int>(ToInt(f, v, 1)); }},
      {"--lr", [](TrainOptions& o, auto& f, auto& v) { o.lr = ToDouble(f, v, 0); }},
      {"--wd", [](TrainOptions& o, auto& f, auto& v) { o.wd = ToDouble(f, v, 0); }},
      {"--beta1", [](TrainOptions& o, auto& f, auto& v) { o.beta1 = ToDouble(f, v, 0); }},
      {"--beta2", [](TrainOptions& o, auto& f, auto& v) { o.beta2 = ToDouble(f, v, 0); }},
      {"--eps", [](TrainOptions& o, auto& f, auto& v) { o.eps = ToDouble(f, v, 0); }},
      {"--warmup", [](TrainOptions& o, auto& f, auto& v) { o.warmup = ToInt(f, v, 0); }},
      {"--accum-freq",
       [](TrainOptions& o, auto& f, auto& v) { o.accum_freq = static_cast<int>(ToInt(f, v, 1)); }},
      {"--precision",
       [](TrainOptions& o, auto& f, auto& v) {
         o.precision = OneOf(f, v, {"fp32", "amp_bf16"});
       }},
      {"--grad-clip-norm",
       [](TrainOptions& o, auto& f, auto& v) { o.grad_clip_norm = ToDouble(f, v, 0); }},
      {"--seed", [](TrainOptions& o, auto& f,
                    auto& v) { o.seed = o.data.seed = static_cast<uint64_t>(ToInt(f, v, 0)); }},
      {"--logs", [](TrainOptions& o, auto&, auto& v) { o.logs = v; }},
      {"--checkpoint-dir", [](TrainOptions& o, auto&, auto& v) { o.checkpoint_dir = v; }},
      {"--metrics-file", [](TrainOptions& o, auto&, auto& v) { o.metrics_file = v; }},
      {"--save-frequency", [](TrainOptions& o, auto& f,
                              auto& v) { o.save_frequency = static_cast<int>(ToInt(f, v, 0)); }},
      {"--resume", [](TrainOptions& o, auto&, auto& v) { o.resume = v; }},
      {"--save-every-n-steps",
       [](TrainOptions& o, auto& f, auto& v) { o.save_every_n_steps = ToInt(f, v, 0); }},
      {"--save-on-signal",
       [](TrainOptions& o, auto& f, auto& v) { o.save_on_signal = OneOf(f, v, {"on", "off"}) == "on"; }},
      {"--log-sample-ids", [](TrainOptions& o, auto&, auto& v) { o.log_sample_ids = v; }},
      {"--pretrained", [](TrainOptions& o, auto&, auto& v) { o.pretrained = v; }},
      {"--pixels",
       [](TrainOptions& o, auto& f, auto& v) { o.pixels = OneOf(f, v, {"uint8", "float"}); }},
      {"--zeroshot-frequency",
       [](TrainOptions& o, auto& f, auto& v) {
         o.zeroshot_frequency = static_cast<int>(ToInt(f, v, 0));
       }},
      {"--zeroshot-samples",
       [](TrainOptions& o, auto& f, auto& v) { o.zeroshot_samples = ToInt(f, v, 0); }},
      {"--log-every-n-steps",
       [](TrainOptions& o, auto& f, auto& v) {
         o.log_every_n_steps = static_cast<int>(ToInt(f, v, 1));
       }},
      {"--max-steps", [](TrainOptions& o, auto& f, auto& v) { o.max_steps = ToInt(f, v, 0); }},
      {"--device",
       [](TrainOptions& o, auto& f, auto& v) {
         if (v != "cpu" && v != "cuda" && v.rfind("cuda:", 0) != 0) {
           throw UsageError(f + ": expected cpu, cuda or cuda:N, got '" + v + "'");
         }
         o.device = v;
       }},
      {"--cuda-graphs",
       [](TrainOptions& o, auto& f, auto& v) { o.cuda_graphs = OneOf(f, v, {"off", "on", "auto"}); }},
      {"--profile-steps", SetProfileSteps},
      {"--profile-file", [](TrainOptions& o, auto&, auto& v) { o.profile_file = v; }},
      {"--text-context",
       [](TrainOptions& o, auto& f, auto& v) { o.text_context = OneOf(f, v, {"cut", "whole"}); }},
      {"--weight-copies",
       [](TrainOptions& o, auto& f, auto& v) { o.weight_copies = OneOf(f, v, {"on", "off"}) == "on"; }},
      {"--fused-bias-grad",
       [](TrainOptions& o, auto& f, auto& v) { o.fused_bias_grad = OneOf(f, v, {"on", "off"}) == "on"; }},
      {"--gpu-timed-spans",
       [](TrainOptions& o, auto& f, auto& v) { o.gpu_timed_spans = OneOf(f, v, {"off", "on"}) == "on"; }},
      {"--threads",
       [](TrainOptions& o, auto& f, auto& v) { o.threads = static_cast<int>(ToInt(f, v, 0)); }},
      {"--dist-backend",
       [](TrainOptions& o, auto& f, auto& v) {
         o.dist_backend = OneOf(f, v, {"gloo", "nccl"});
       }},
      {"--fusion-threshold-mb",
       [](TrainOptions& o, auto& f, auto& v) { o.fusion_threshold_mb = ToDouble(f, v, 0); }},
      {"--cycle-time-ms",
       [](TrainOptions& o, auto& f, auto& v) { o.cycle_time_ms = ToDouble(f, v, 0); }},
      {"--timeline-path",
       [](TrainOptions& o, auto&, auto& v) {
         o.timeline_path = v;
         o.timeline = true;
       }},
  };
  return flags;
}

const std::map<std::string, SwitchSetter>& SwitchFlags() {
  static const std::map<std::string, SwitchSetter> flags = {
      {"--save-most-recent", [](TrainOptions& o) { o.save_most_recent = true; }},
      {"--local-loss", [](TrainOptions& o) { o.local_loss = true; }},
      {"--gather-with-grad", [](TrainOptions& o) { o.gather_with_grad = true; }},
      {"--hierarchical-allreduce", [](TrainOptions& o) { o.hierarchical_allreduce = true; }},
      {"--timeline", [](TrainOptions& o) { o.timeline = true; }},
      {"--timeline-mark-cycles", [](TrainOptions& o) { o.timeline_mark_cycles = true; }},
      {"--sampler-pad", [](TrainOptions& o) { o.data.drop_last = false; }},
  };
  return flags;
}

void ResolveModel(TrainOptions& o) {
  try {
    o.model_config = o.model_config_path.empty() ? PresetModelConfig(o.model)
                                                 : LoadModelConfig(o.model_config_path);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--model: ") + e.what());
  }
  o.data.channels = o.model_config.vision.channels;
  o.data.image_size = o.model_config.vision.image_size;
}

}  // namespace

TrainOptions ParseTrainFlags(const std::vector<std::string>& args, bool* help) {
  TrainOptions o;
  *help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool inline_value = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    if (flag == "--help" || flag == "-h") {
      *help = true;
      return o;
    }
    if (auto s = SwitchFlags().find(flag); s != SwitchFlags().end()) {
      if (inline_value) throw UsageError(flag + " takes no value");
      s->second(o);
      continue;
    }
    auto v = ValueFlags().find(flag);
    if (v == ValueFlags().end()) {
      throw UsageError("unknown flag '" + args[i] + "' (see dtrain-clip train --help)");
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      value = args[++i];
    }
    v->second(o, flag, value);
  }
  if (!o.train_num_samples_given && o.data.dataset_type == "fashion-mnist") {
    o.data.train_num_samples = kFashionMnistDefaultSamples;
  }
  if ((o.data.dataset_type == "csv" || o.data.dataset_type == "webdataset") &&
      o.data.train_data.empty()) {
    throw UsageError("--dataset-type " + o.data.dataset_type + " needs --train-data");
  }
  ResolveModel(o);
  return o;
}

std::map<std::string, bool> TrainFlags() {
  std::map<std::string, bool> flags;
  for (const auto& [name, setter] : ValueFlags()) flags[name] = true;
  for (const auto& [name, setter] : SwitchFlags()) flags[name] = false;
  return flags;
}

const char* TrainHelpText() {
  return R"(Usage: dtrain-clip train [FLAGS]

Trains a CLIP model (OpenCLIP's architecture and loss) with LibTorch. Without flags: the
fmnist-tiny preset on Fashion-MNIST (30,720 samples, 1 epoch), then zero-shot top-1 on the
10,000 test images. Flags follow OpenCLIP's names; --flag=value works too.

Model:
  --model fmnist-tiny|vit-b-32   the preset (fmnist-tiny)
  --model-config FILE        OpenCLIP model-config JSON (embed_dim, vision_cfg, text_cfg)
  --bpe-vocab FILE           bpe_simple_vocab_16e6.txt.gz for BPE-tokenized models
Data:
  --dataset-type fashion-mnist|csv|webdataset|synthetic
                             where samples come from (fashion-mnist)
  --train-data PATH          Fashion-MNIST dir, CSV file, or tar shards (a{0000..0099}.tar)
  --val-data DIR             Fashion-MNIST dir for zero-shot evaluation (default: Debian's)
  --csv-img-key KEY          image path column (filepath)
  --csv-caption-key KEY      caption column (title)
  --csv-separator C          column separator (tab; "\t" or "tab" for a tab)
  --train-num-samples N      samples per epoch (0: all; fashion-mnist default 30720)
  --batch-size N             per-rank batch (256)
  --workers N                loader threads (1)
  --bad-data skip|fatal      skip bad samples with a count (default) or stop at the first
  --sampler-pad              give every rank an equal shard by repeating samples, and keep a
                             last partial batch (default: drop the remainder)
Optimisation:
  --epochs N (1)  --lr X (1e-3)  --wd X (0.1)  --warmup STEPS (10)
  --beta1 X (0.9)  --beta2 X (0.98)  --eps X (1e-6)
  --accum-freq K             accumulate K micro-batches per step (contrast over all of them)
  --precision fp32|amp_bf16  amp_bf16: bfloat16 autocast (on a CPU: the GPU step's operators, slowly)
  --grad-clip-norm X         clip the global gradient norm (0: off)
  --seed N                   seed for weights and data order (0)
  --max-steps N              stop after N optimizer steps (0: no limit)
Checkpoints and logs:
  --logs DIR                 root for checkpoints (default $DTRAIN_LOG_DIR, else ./logs)
  --checkpoint-dir DIR       where epoch_N.pt go (default <logs>/checkpoints); rank 0 writes
                             them, and every node that does not share its folder a copy
  --save-frequency N         save epoch_N.pt every N epochs (1; 0: never)
  --save-most-recent         also keep epoch_latest.pt
  --save-every-n-steps N     also write epoch_latest.pt every N optimizer steps, with the place
                             in the epoch, so --resume latest continues mid-epoch (0: off)
  --save-on-signal on|off    on SIGTERM, SIGINT (Ctrl-C) or SIGUSR1 every rank stops after the
                             same step, a step or two later, writes epoch_latest.pt there (with
                             checkpoints on) and ends by the signal (on); off: it ends at once
  --resume PATH|latest       restore model, optimizer, step and RNG, and the place in the epoch
                             (on the same or fewer ranks: the rest of the epoch is split anew);
                             with ranks, the newest checkpoint any rank holds, sent to the others
  --log-sample-ids FILE      testing aid: every rank appends "STEP ID ID ..." per batch
  --pretrained FILE          start from OpenCLIP weights (.safetensors, or a torch.save
                             state_dict / checkpoint) of the same architecture
  --metrics-file FILE        JSONL metrics (default <logs>/metrics/rank-R.jsonl)
  --zeroshot-frequency N     zero-shot eval every N epochs (1; 0: never)
  --zeroshot-samples N       evaluate on the first N test images (0: all 10,000)
  --log-every-n-steps N      plain progress line every N steps (10)
Execution:
  --device cpu|cuda|cuda:N   (cpu); cuda alone: cuda:LOCAL_RANK, one GPU per local rank
  --threads N                intra-op threads (0: OMP_NUM_THREADS or all cores)
  --cuda-graphs off|on|auto  replay the step (forward, backward, fused AdamW; with ranks, NCCL
                             allreduces of fixed buckets) as a CUDA graph; no --accum-freq or
                             --grad-clip-norm; a graph per text length (the cut rounded up
                             to 8); on the CPU `on` runs the same static-buffer step eagerly
                             (default off: not yet measured on a GPU; see man dtrain-clip)
  --pixels uint8|float       what loaders hand over: 8-bit pixels normalised on the device
                             (default on CUDA: a pinned copy on its own stream) or floats
                             normalised by the loaders (default on the CPU)
  --text-context cut|whole   cut: the text tower stops at the batch's longest caption (same
                             features, less work; default); whole: every context position, as
                             OpenCLIP computes them (like-for-like speed comparisons)
  --weight-copies on|off     amp_bf16: cast the matrix weights to bfloat16 once a step in one
                             multi-tensor copy, not at each use (on; the same numbers; not yet
                             measured on a GPU)
  --fused-bias-grad on|off   CUDA, bf16: each linear layer's bias gradient from its weight
                             gradient's product (cuBLASLt's BGRADB epilogue), not a sum over
                             the rows afterwards (off: not yet measured on a GPU)
Distributed (rank and world size come from the environment, as dtrain launch sets it):
  --dist-backend gloo|nccl   --local-loss   --gather-with-grad
  --fusion-threshold-mb X    --cycle-time-ms X   --hierarchical-allreduce
  --timeline                 --timeline-path FILE   --timeline-mark-cycles
  --profile-steps A[-B]      the PyTorch profiler (Kineto: operators; CUDA kernels and copies)
                             over steps A to B, saved as the Chrome trace torch.profiler
                             writes (dtrain timeline reads it)
  --profile-file FILE        where (default <logs>/profiler/rank-R.pt.trace.json)
  --gpu-timed-spans on|off   also time FORWARD, BACKWARD, OPTIMIZER (GRAPH_STEP) with CUDA
                             events, on the trace's gpu track, resolved a step later without
                             a sync per span (off; no cost measurable on an H200)
)";
}

}  // namespace dtrain::clip
