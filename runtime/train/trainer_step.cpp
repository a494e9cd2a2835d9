// Trainer: one optimizer step (trainer_state.h).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/dist/heartbeat.h"
#include "runtime/trace/phase_span.h"
#include "runtime/trace/timeline.h"
#include "runtime/trace/trace_vocabulary.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/trainer_state.h"

namespace dtrain::clip {

bool Trainer::NextBatch(DeviceBatch& batch) {
  GlobalHeartbeat().SetActivity(trace::kData);
  TimelineSpan span(trace::kComputeTrack, trace::kData);
  StagedBatch staged;
  {
    // Blocked on the loaders or the stager.
    TimelineSpan wait(trace::kComputeTrack, trace::kWaitForData);
    if (!stager_->Next(staged)) return false;
  }
  batch.host = std::move(staged.host);  // moved, not copied: what the images borrow stays put
  upload_->Receive(staged.sent, &batch.images, &batch.tokens);
  return true;
}

void Trainer::StageBatch(StagedBatch& batch) const {
  const HostBatch& h = batch.host;
  const int64_t context = tokenizer_->context_length();
  std::vector<int64_t> rows = tokenizer_->Tokenize(h.captions);
  // The text tower's cut (text_tower.h), decided here from the host's rows: on the device it
  // would be a read-back that stalls the host until the queued work is done.
  int64_t length = model_->text->whole_context() ? context : TextLengthToCut(rows, h.size, context);
  // A captured step needs a graph per length: a few lengths, not one per longest caption.
  if (captured_step_) length = TextLengthBucket(length, context);
  // On CUDA in pinned memory, so its copy is queued behind the work on the copy stream. The
  // rows are copied by hand: ATen's copy of a large batch would start the intra-op thread pool
  // from this thread.
  torch::Tensor tokens =
      torch::empty({h.size, length},
                   torch::TensorOptions().dtype(torch::kLong).pinned_memory(!device_.is_cpu()));
  auto* to = tokens.data_ptr<int64_t>();
  for (int64_t i = 0; i < h.size; ++i) {
    std::memcpy(to + i * length, rows.data() + i * context,
                static_cast<size_t>(length) * sizeof(int64_t));
  }
  batch.sent = upload_->Send(batch.host, tokens);
}

// Seeded with 1/world size when distributed: each rank's gradients come out pre-divided, and the
// gradient sync's sum over ranks is the average without another pass over them.
void Trainer::Backward(const torch::Tensor& loss) {
  loss.backward(torch::full_like(loss, coll_.BackwardSeed()));
}

// OpenCLIP's accumulation: features of every micro-batch are computed once without gradients;
// each micro-batch is then recomputed with gradients and contrasted against all of them, so the
// summed gradients are those of one large batch.
torch::Tensor Trainer::ForwardBackward(std::vector<DeviceBatch>& micro) {
  const bool bf16 = o_.precision == "amp_bf16";
  if (micro.size() == 1) {
    torch::Tensor loss;
    {
      GlobalHeartbeat().SetActivity(trace::kForward);
      PhaseSpan span(gpu_spans_.get(), trace::kForward);
      AutocastScope autocast(bf16, device_);
      WeightCopies::Scope copies(weight_copies_.get());
      ClipOutput out = model_->forward(micro[0].images, micro[0].tokens);
      loss = coll_.Loss(out.image_features, out.text_features, out.logit_scale);
    }
    {
      GlobalHeartbeat().SetActivity(trace::kBackward);
      PhaseSpan span(gpu_spans_.get(), trace::kBackward);
      Backward(loss);
      if (weight_copies_) weight_copies_->HandOverGradients();
    }
    coll_.AfterBackward(/*last=*/true);
    return loss.detach();
  }
  std::vector<torch::Tensor> images, texts;
  {
    GlobalHeartbeat().SetActivity(trace::kForward);
    PhaseSpan span(gpu_spans_.get(), trace::kForward);
    torch::NoGradGuard no_grad;
    AutocastScope autocast(bf16, device_);
    WeightCopies::Scope copies(weight_copies_.get());  // refreshed once for the whole step
    for (auto& m : micro) {
      images.push_back(model_->EncodeImage(m.images));
      texts.push_back(model_->EncodeText(m.tokens));
    }
  }
  torch::Tensor last;
  for (size_t j = 0; j < micro.size(); ++j) {
    torch::Tensor loss;
    {
      GlobalHeartbeat().SetActivity(trace::kForward);
      PhaseSpan span(gpu_spans_.get(), trace::kForward);
      AutocastScope autocast(bf16, device_);
      WeightCopies::Scope copies(weight_copies_.get(), /*refresh=*/false);
      ClipOutput out = model_->forward(micro[j].images, micro[j].tokens);
      auto all_images = images, all_texts = texts;
      all_images[j] = out.image_features;
      all_texts[j] = out.text_features;
      loss = coll_.Loss(torch::cat(all_images), torch::cat(all_texts), out.logit_scale);
    }
    {
      GlobalHeartbeat().SetActivity(trace::kBackward);
      PhaseSpan span(gpu_spans_.get(), trace::kBackward);
      Backward(loss);
    }
    coll_.AfterBackward(/*last=*/j + 1 == micro.size());
    last = loss.detach();  // every j computes the same full-batch loss value
  }
  return last;
}

torch::Tensor Trainer::CapturedTrainStep(DeviceBatch& batch) {
  GlobalHeartbeat().SetActivity(trace::kGraphStep);
  PhaseSpan span(gpu_spans_.get(), trace::kGraphStep);
  torch::Tensor lr = torch::full({}, last_lr_, torch::TensorOptions(device_).dtype(torch::kFloat));
  return captured_step_->Run({batch.images, batch.tokens, lr}).at(0).clone();
}

void Trainer::OptimizerStep() {
  GlobalHeartbeat().SetActivity(trace::kOptimizer);
  PhaseSpan span(gpu_spans_.get(), trace::kOptimizer);
  flat_->AdoptGradients();
  if (o_.grad_clip_norm > 0) {
    torch::nn::utils::clip_grad_norm_(flat_->buffers(), o_.grad_clip_norm);
  }
  if (fused_adamw_) {
    fused_adamw_->Step(
        torch::full({}, last_lr_, torch::TensorOptions(device_).dtype(torch::kFloat)));
  } else {
    optimizer_->step();
  }
  model_->ClampLogitScale();
}

bool Trainer::TrainStep(int epoch) {
  GlobalHeartbeat().BeginStep();
  if (profile_) profile_->BeforeStep(progress_.step + 1);
  if (gpu_spans_) gpu_spans_->Poll();  // the spans of steps the GPU has finished, no waiting
  std::vector<DeviceBatch> micro(o_.accum_freq);
  for (auto& m : micro) {
    if (!NextBatch(m)) return false;
  }
  last_lr_ = schedule_.At(progress_.step);
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(last_lr_);
  }
  torch::Tensor loss;
  if (captured_step_) {
    loss = CapturedTrainStep(micro[0]);
  } else {
    // One rank: backward hands its gradients over and AdoptGradients gathers them (no add per
    // parameter). With ranks they stay views of the flat buffers, whose buckets the gradient
    // sync then allreduces in place.
    if (coll_.world_size() > 1) {
      flat_->ZeroGrad();
    } else {
      flat_->ReleaseGradients();
    }
    loss = ForwardBackward(micro);
    OptimizerStep();
  }
  ++progress_.step;
  GlobalHeartbeat().SetStep(progress_.step);
  int64_t samples = 0;
  for (auto& m : micro) {
    samples += m.host.size;
    sample_log_.Write(progress_.step, m.host.indices);
  }
  samples *= coll_.world_size();
  progress_.samples += samples;
  progress_.epoch_samples += samples;
  samples_this_run_ += samples;
  ++steps_this_run_;
  // The last step's line first: on CUDA its numbers were copied behind its own work, which the
  // device has finished or nearly, while this step's work keeps it busy. Its wait is part of
  // this step's time.
  FlushStepLine();
  // From the last step's clock reading (or the epoch's start) to this one: what runs between
  // two steps (the numbers' queued copy, a step checkpoint) is in the next step's time, so the
  // steps' times add up to the epoch's wall clock and samples/s is the wall clock's.
  const auto now = TrainerClock::now();
  const double seconds = std::chrono::duration<double>(now - step_clock_).count();
  step_clock_ = now;
  last_step_s_ = seconds;
  train_seconds_ += seconds;
  const int64_t total = steps_per_epoch_ * o_.epochs;
  StepLine line;
  line.epoch = epoch;
  line.step = progress_.step;
  line.lr = last_lr_;
  line.step_s = seconds;
  line.samples_per_s = train_seconds_ > 0 ? samples_this_run_ / train_seconds_ : 0;
  line.eta_s = train_seconds_ / static_cast<double>(steps_this_run_) *
               static_cast<double>(total - progress_.step);
  torch::Tensor scalars;
  {
    torch::NoGradGuard no_grad;
    scalars = torch::stack({loss.detach().reshape({}).to(torch::kFloat),
                            model_->logit_scale.detach().exp().reshape({}).to(torch::kFloat)});
  }
  step_scalars_->Queue(scalars);
  pending_line_ = line;
  if (device_.is_cpu()) FlushStepLine();
  if (profile_) profile_->AfterStep(progress_.step);
  return true;
}

void Trainer::FlushStepLine() {
  if (!pending_line_) return;
  const StepLine line = *pending_line_;
  pending_line_.reset();
  const std::vector<double> values = step_scalars_->Take();
  LogStep(line, values.at(0), values.at(1));
}

void Trainer::LogStep(const StepLine& line, double loss, double logit_scale) {
  const int64_t total = steps_per_epoch_ * o_.epochs;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  metrics_.Write(MetricsLine()
                     .Add("step", line.step)
                     .Add("time_us", now_us)  // places the line in its attempt (dtrain launch)
                     .Add("epoch", line.epoch)
                     .Add("loss", loss)
                     .Add("lr", line.lr)
                     .Add("samples_per_s", line.samples_per_s)
                     .Add("step_s", line.step_s)
                     .Add("logit_scale", logit_scale));
  display_->Step(line.epoch + 1, o_.epochs, line.step, total, loss, line.samples_per_s, line.eta_s);
}

}  // namespace dtrain::clip
