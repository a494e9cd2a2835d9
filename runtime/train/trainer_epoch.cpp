// Trainer: what happens between epochs: their starts, checkpoints, zero-shot evaluation
// (trainer_state.h).
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "runtime/data/fashion_mnist.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/trainer_state.h"
#include "runtime/train/zero_shot_eval.h"

namespace dtrain::clip {

void Trainer::SaveCheckpoints(int epoch) {
  const int completed = epoch + 1;
  const bool periodic =
      o_.save_frequency > 0 && (completed % o_.save_frequency == 0 || completed == o_.epochs);
  // Step saves and a stop on a signal keep epoch_latest.pt, which --resume latest takes first,
  // so it must also move on at the epoch's end.
  std::error_code error;
  const bool latest = o_.save_most_recent || o_.save_every_n_steps > 0 ||
                      std::filesystem::exists(checkpoint_dir_ + "/epoch_latest.pt", error);
  if (!keeps_checkpoints_ || (!periodic && !latest)) return;
  StopSignals::Busy busy(stop_signals_);  // a signal meanwhile is taken after the write
  SyncOptimizerState();
  MakeDirectories(checkpoint_dir_);
  if (periodic) WriteCheckpoint("epoch_" + std::to_string(completed) + ".pt");
  if (latest) WriteCheckpoint("epoch_latest.pt");
}

// Mid-epoch: epoch_latest.pt with the place in the epoch, so a restart (perhaps on fewer ranks)
// continues the epoch's sample order where this run stands.
void Trainer::SaveStepCheckpoint() {
  if (o_.save_every_n_steps <= 0 || progress_.step % o_.save_every_n_steps != 0) return;
  if (!keeps_checkpoints_) return;
  StopSignals::Busy busy(stop_signals_);
  WriteLatestCheckpoint();
}

void Trainer::WriteLatestCheckpoint() {
  SyncOptimizerState();
  MakeDirectories(checkpoint_dir_);
  WriteCheckpoint("epoch_latest.pt");
}

void Trainer::SaveStopCheckpoint() {
  stop_signals_->Stopping(stop_signal_);
  const auto started = TrainerClock::now();
  std::string wrote;
  if (keeps_checkpoints_) {
    // A step checkpoint of this very step is already there (--save-every-n-steps).
    std::string how = " (this step's checkpoint, already written by --save-every-n-steps)";
    if (latest_written_step_ != progress_.step) {
      WriteLatestCheckpoint();
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), " written in %.2f s", SecondsSince(started));
      how = seconds;
    }
    wrote = ": " + checkpoint_dir_ + "/epoch_latest.pt" + how +
            "; --resume latest continues from there";
  }
  display_->Break();
  std::printf("stopped by %s after step %lld%s%s\n", StopSignals::Name(stop_signal_),
              static_cast<long long>(progress_.step),
              coll_.world_size() > 1 ? ", the step every rank stopped at" : "", wrote.c_str());
  std::fflush(stdout);
}

void Trainer::WriteCheckpoint(const std::string& name) {
  SaveCheckpoint(checkpoint_dir_ + "/" + name, *model_, *optimizer_, progress_,
                 o_.model_config.name, static_cast<int64_t>(flat_->layout()));
  if (name == "epoch_latest.pt") latest_written_step_ = progress_.step;
}

int64_t Trainer::StartEpoch(int epoch) {
  progress_.world_size = coll_.world_size();
  progress_.global_batch = GlobalBatch();
  stager_->Stop();
  if (progress_.epoch_samples <= 0) {
    source_->StartEpoch(epoch);
    stager_->Start();
    return steps_per_epoch_;
  }
  const int64_t batches = source_->ResumeEpoch(epoch, progress_.epoch_samples);
  stager_->Start();
  return batches < 0 ? steps_per_epoch_ : batches / o_.accum_freq;
}

void Trainer::Evaluate(int epoch) {
  const int completed = epoch + 1;
  if (o_.zeroshot_frequency <= 0 || coll_.rank() != 0) return;
  if (completed % o_.zeroshot_frequency != 0 && completed != o_.epochs) return;
  if (o_.data.dataset_type == "synthetic" && o_.val_data.empty()) return;
  const std::string dir = !o_.val_data.empty() ? o_.val_data
                          : o_.data.dataset_type == "fashion-mnist" && !o_.data.train_data.empty()
                              ? o_.data.train_data
                              : DefaultFashionMnistDir();
  FashionMnistImages test = LoadFashionMnistTest(
      dir, o_.model_config.vision.channels, o_.model_config.vision.image_size, o_.zeroshot_samples);
  ZeroShotResult result;
  {
    StopSignals::Busy busy(stop_signals_);
    AutocastScope autocast(o_.precision == "amp_bf16", device_);
    result = ZeroShotTop1(model_, *tokenizer_, test, device_);
  }
  display_->Break();
  std::printf("zero-shot top-1 %.4f on %lld Fashion-MNIST test images (%.1f s)\n", result.top1,
              static_cast<long long>(result.images), result.seconds);
  metrics_.Write(MetricsLine()
                     .Add("event", "eval")
                     .Add("epoch", completed)
                     .Add("step", progress_.step)
                     .Add("zeroshot_top1", result.top1)
                     .Add("images", result.images)
                     .Add("eval_s", result.seconds));
}

}  // namespace dtrain::clip
