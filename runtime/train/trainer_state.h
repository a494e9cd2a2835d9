// The Trainer behind RunTraining (trainer.h): its state and its parts, defined in three files:
// trainer.cpp (set-up, resume, the run from the first epoch to the last metrics line),
// trainer_step.cpp (one optimizer step: batches, forward and backward, the captured step, the
// optimizer, the step's metrics line) and trainer_epoch.cpp (epoch starts, checkpoints, zero-shot
// evaluation). Included by those three only.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/train_options.h"
#include "runtime/data/data_source.h"
#include "runtime/dist/rank_device.h"
#include "runtime/dist/train_collectives.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/weight_copies.h"
#include "runtime/text/tokenizer.h"
#include "runtime/trace/device_span_ring.h"
#include "runtime/train/batch_stager.h"
#include "runtime/train/batch_upload.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/fused_adamw.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/metrics_log.h"
#include "runtime/train/node_local_checkpoints.h"
#include "runtime/train/progress_display.h"
#include "runtime/train/sample_log.h"
#include "runtime/train/step_profile.h"
#include "runtime/train/step_scalars.h"
#include "runtime/train/stop_agreement.h"
#include "runtime/train/stop_signals.h"

namespace dtrain::clip {

using TrainerClock = std::chrono::steady_clock;

inline double SecondsSince(TrainerClock::time_point start) {
  return std::chrono::duration<double>(TrainerClock::now() - start).count();
}

// A step's metrics line but for the numbers still on the device (StepScalars).
struct StepLine {
  int epoch = 0;
  int64_t step = 0;
  double lr = 0, step_s = 0, samples_per_s = 0, eta_s = 0;
};

// One micro-batch as tensors; `host` keeps the pixels that `images` borrows alive until backward.
struct DeviceBatch {
  HostBatch host;
  torch::Tensor images, tokens;
};

class Trainer {
 public:
  Trainer(const TrainOptions& options, TrainCollectives& collectives)
      : o_(options), coll_(collectives), device_(RankDevice(options.device)) {}

  int Run();

 private:
  void SetUpRuntime();
  void BuildModelAndOptimizer();
  // Which ranks write checkpoints (node_local_checkpoints.h); collective.
  void PlaceCheckpoints();
  // Collective: every rank takes the newest checkpoint any rank holds (node_local_checkpoints.h).
  void Resume();
  // This rank's own copy at `path` ("" for none) loaded: its step, kNoCheckpoint, or (with ranks)
  // kUnreadableCheckpoint with the reason in `unreadable`.
  int64_t LoadOwnCheckpoint(const std::string& path, std::string* unreadable);
  // No rank holds a checkpoint it can read: fresh for --resume latest, else why not.
  void StartWithoutCheckpoint(const std::vector<int64_t>& steps, const std::string& unreadable);
  // `plan.source` sends its file to every rank; one with an older copy, none or an unreadable one
  // loads it. Returns what this rank resumed from, for the log.
  std::string TakeNewestCheckpoint(const ResumePlan& plan, int64_t own, const std::string& path,
                                   const std::string& unreadable);
  // After a load: the optimizer's moments in this build's flat layout.
  void AdoptFlatLayout(int64_t layout, const std::string& name);
  void OpenData();
  bool NextBatch(DeviceBatch& batch);
  // On the stager's thread: the batch's tokens, its text cut and BatchUpload::Send.
  void StageBatch(StagedBatch& batch) const;
  // One optimizer step over accum_freq micro-batches; false at the end of the epoch.
  bool TrainStep(int epoch);
  torch::Tensor ForwardBackward(std::vector<DeviceBatch>& micro);
  void Backward(const torch::Tensor& loss);
  void OptimizerStep();
  // --cuda-graphs: builds the CapturedStep (after a resume, so it steps the restored moments).
  void SetUpCapturedStep();
  // --gpu-timed-spans: the event ring that times the step's phases on the GPU (CUDA only, and
  // only with a timeline to write them to).
  void SetUpGpuSpans();
  // --weight-copies: the bfloat16 copies of the matrix weights (amp_bf16), their gradients
  // handed over after backward or, with ranks or micro-batches on the eager step, added into the
  // float32 ones as backward makes them.
  void SetUpWeightCopies(bool static_step);
  // One step through the CapturedStep: captured or replayed on CUDA, the same step eagerly on
  // the CPU and for a batch of another shape.
  torch::Tensor CapturedTrainStep(DeviceBatch& batch);
  // The fused AdamW's step counts into the optimizer's state, before a checkpoint is written.
  void SyncOptimizerState() {
    if (fused_adamw_) fused_adamw_->SyncStepCounts();
  }
  void SaveCheckpoints(int epoch);
  void SaveStepCheckpoint();
  // epoch_latest.pt of this step, with the place in the epoch (a step save, a stop).
  void WriteLatestCheckpoint();
  // --save-on-signal: the agreement and the signals, when this run has checkpoints to write.
  void SetUpStopOnSignal();
  // After each step: true when the ranks agreed to stop after it (stop_signal_ says why).
  bool StopAgreedAfterStep();
  // Every rank, after the step the ranks agreed on: epoch_latest.pt with the place in the epoch.
  void SaveStopCheckpoint();
  // checkpoint_dir_/`name`: the model, the optimizer, the progress and the flat layout.
  void WriteCheckpoint(const std::string& name);
  // Starts `epoch` (mid-way after a mid-epoch resume); returns the optimizer steps it holds.
  int64_t StartEpoch(int epoch);
  void Evaluate(int epoch);
  // Writes the step line waiting for its numbers (a step late on CUDA, at once on the CPU).
  void FlushStepLine();
  void LogStep(const StepLine& line, double loss, double logit_scale);
  int64_t GlobalBatch() const {
    return int64_t{o_.data.batch_size} * o_.accum_freq * coll_.world_size();
  }

  const TrainOptions& o_;
  TrainCollectives& coll_;
  torch::Device device_;
  std::string checkpoint_dir_;
  bool keeps_checkpoints_ = false;    // this rank writes them (rank 0, or its node's own copy)
  int64_t latest_written_step_ = -1;  // the step of the epoch_latest.pt this run wrote last
  ClipModel model_{nullptr};
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<FusedAdamW> fused_adamw_;      // on CUDA (and --cuda-graphs)
  std::unique_ptr<CapturedStep> captured_step_;  // --cuda-graphs only
  std::string cuda_graphs_note_;
  int64_t static_sync_buckets_ = 0;              // --cuda-graphs with more than one rank
  std::unique_ptr<DeviceEventClock> gpu_clock_;  // --gpu-timed-spans only; outlives the ring
  std::unique_ptr<DeviceSpanRing> gpu_spans_;
  std::string gpu_spans_note_;
  std::unique_ptr<WeightCopies> weight_copies_;  // --weight-copies with amp_bf16
  std::string weight_copies_note_;
  std::unique_ptr<BatchSource> source_;
  std::unique_ptr<BatchUpload> upload_;
  std::unique_ptr<BatchStager> stager_;  // after source_ and upload_: stopped before them
  CosineLrSchedule schedule_;
  int64_t steps_per_epoch_ = 0;
  TrainProgress progress_;
  MetricsLog metrics_;
  SampleLog sample_log_;
  std::unique_ptr<ProgressDisplay> display_;
  double train_seconds_ = 0;
  TrainerClock::time_point step_clock_;  // the last step's end, or its epoch's start
  int64_t samples_this_run_ = 0;
  int64_t steps_this_run_ = 0;
  double last_lr_ = 0;
  double last_step_s_ = 0;
  std::unique_ptr<StepScalars> step_scalars_;
  std::optional<StepLine> pending_line_;
  std::unique_ptr<StepProfile> profile_;  // --profile-steps
  StopSignals* stop_signals_ = nullptr;   // --save-on-signal, with checkpoints to write
  std::unique_ptr<StopAgreement> stop_agreement_;
  int stop_signal_ = 0;  // the signal the ranks agreed to stop on
};

}  // namespace dtrain::clip
