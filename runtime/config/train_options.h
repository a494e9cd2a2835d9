// TrainOptions: everything `dtrain-clip train` is told, from flags (OpenCLIP's names) and the
// environment. Torch-free; ParseTrainFlags fills it and reports bad flags as UsageError.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/data/data_source.h"

namespace dtrain::clip {

// A bad command line: main() prints it with a hint and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainOptions {
  // Model.
  std::string model = "fmnist-tiny";  // --model preset
  std::string model_config_path;      // --model-config FILE.json (OpenCLIP format)
  ModelConfig model_config;           // resolved from the two above
  std::string bpe_vocab;              // --bpe-vocab bpe_simple_vocab_16e6.txt.gz

  // Data (DataOptions carries --dataset-type, --train-data, --csv-*, --batch-size, --workers...).
  DataOptions data;
  std::string val_data;  // --val-data: Fashion-MNIST dir for zero-shot eval
  bool train_num_samples_given = false;

  // Optimisation.
  int epochs = 1;
  double lr = 1e-3;
  double wd = 0.1;
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-6;
  int64_t warmup = 10;  // steps
  int accum_freq = 1;
  std::string precision = "fp32";  // fp32 | amp_bf16
  double grad_clip_norm = 0;       // 0: no clipping
  uint64_t seed = 0;

  // Checkpoints and logs.
  std::string logs;            // --logs: root for checkpoints/ (default $DTRAIN_LOG_DIR or ./logs)
  std::string checkpoint_dir;  // --checkpoint-dir (default <logs>/checkpoints)
  std::string metrics_file;    // --metrics-file (default <log dir>/metrics/rank-R.jsonl)
  int save_frequency = 1;      // epochs between epoch_N.pt; 0: none
  bool save_most_recent = false;   // also keep epoch_latest.pt
  int64_t save_every_n_steps = 0;  // also write epoch_latest.pt every N steps, mid-epoch (0: off)
  // --save-on-signal: on SIGTERM, SIGINT or SIGUSR1 the ranks agree on a step and write
  // epoch_latest.pt there before ending by the signal (train/stop_signals.h); off: end at once.
  bool save_on_signal = true;
  std::string log_sample_ids;      // testing aid: append "STEP ID ..." per batch trained on
  std::string pretrained;          // --pretrained: OpenCLIP weights to start from
  std::string resume;              // PATH or "latest"
  int zeroshot_frequency = 1;      // epochs between zero-shot evals; 0: none
  int64_t zeroshot_samples = 0;    // test images to evaluate; 0: all 10,000
  int log_every_n_steps = 10;      // plain progress lines (a TTY gets a live line)
  int64_t max_steps = 0;           // stop after this many optimizer steps (0: no limit)

  // Execution.
  std::string device = "cpu";  // cpu | cuda | cuda:N
  int threads = 0;             // intra-op threads; 0: LibTorch's default (OMP_NUM_THREADS)
  // --cuda-graphs off|on|auto: the step as a replayed CUDA graph (train/cuda_graphs_choice.h).
  // Off by default: on an H200 slower than the eager step, which cuts the text context.
  std::string cuda_graphs = "off";
  // --text-context cut|whole: cut (default) computes the text tower up to the batch's longest
  // caption (the same features, sooner); whole computes every context position, as OpenCLIP does.
  std::string text_context = "cut";
  // --gpu-timed-spans on|off: the step's phases also timed by CUDA events
  // (trace/device_span_ring.h) on the timeline's gpu track. Off by default; on an H200 its cost
  // was within the run-to-run noise.
  bool gpu_timed_spans = false;
  // --weight-copies on|off: with amp_bf16, the matrix weights cast to bfloat16 once a step in
  // one multi-tensor copy (model/weight_copies.h) instead of by autocast at each use. The same
  // numbers bit for bit.
  bool weight_copies = true;
  // --fused-bias-grad on|off: on CUDA, LinearRows' bias gradient comes out of its weight
  // gradient's cuBLASLt product (model/fused_bias_grad.h). Off until measured on a GPU.
  bool fused_bias_grad = false;

  // Distributed (wired by the distributed runtime; parsed here).
  std::string pixels;        // --pixels uint8|float ("" = uint8 on CUDA, float on the CPU)
  std::string dist_backend;  // gloo | nccl ("" = by device)
  bool local_loss = false;
  bool gather_with_grad = false;
  double fusion_threshold_mb = -1;  // -1: HOROVOD_FUSION_THRESHOLD or the default
  double cycle_time_ms = -1;        // -1: HOROVOD_CYCLE_TIME or the default
  bool hierarchical_allreduce = false;
  bool timeline = false;              // --timeline (or DTRAIN_TIMELINE set)
  bool timeline_mark_cycles = false;  // --timeline-mark-cycles (or HOROVOD_TIMELINE_MARK_CYCLES)
  std::string timeline_path;
  // --profile-steps A[-B]: the PyTorch profiler over steps A to B (0: off), saved to
  // --profile-file (default <logs>/profiler/rank-R.pt.trace.json).
  int64_t profile_first = 0, profile_last = 0;
  std::string profile_file;
};

// Parses the arguments after `train`. Throws UsageError naming the flag. `--help` sets *help.
TrainOptions ParseTrainFlags(const std::vector<std::string>& args, bool* help);

// The text of `dtrain-clip train --help`.
const char* TrainHelpText();

// Every flag ParseTrainFlags accepts, and whether it takes a value (the rest are switches).
std::map<std::string, bool> TrainFlags();

}  // namespace dtrain::clip
