#include "runtime/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/config/rank_file_path.h"
#include "runtime/data/data_source.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/dist/dist_env.h"
#include "runtime/dist/heartbeat.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/fused_bias_grad.h"
#include "runtime/model/open_clip_weights.h"
#include "runtime/text/tokenizer.h"
#include "runtime/trace/device_span_ring.h"
#include "runtime/trace/timeline.h"
#include "runtime/train/batch_upload.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/checkpoint_parts.h"
#include "runtime/train/cuda_event_clock.h"
#include "runtime/train/cuda_graphs_choice.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/fused_adamw.h"
#include "runtime/train/graph_train_step.h"
#include "runtime/train/heap_retention.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/metrics_log.h"
#include "runtime/train/node_local_checkpoints.h"
#include "runtime/train/progress_display.h"
#include "runtime/train/sample_log.h"
#include "runtime/train/trainer_state.h"

// OpenBLAS keeps its own thread pool; LibTorch's set_num_threads does not size it.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace dtrain::clip {

void Trainer::SetUpRuntime() {
  RetainFreedHeapMemory();
  if (o_.threads > 0) {
    torch::set_num_threads(o_.threads);
    if (openblas_set_num_threads) openblas_set_num_threads(o_.threads);
  }
  torch::manual_seed(o_.seed);
  std::string logs = o_.logs;
  if (logs.empty()) {
    const char* env = std::getenv("DTRAIN_LOG_DIR");
    logs = env && *env ? env : "logs";
  }
  checkpoint_dir_ = o_.checkpoint_dir.empty() ? logs + "/checkpoints" : o_.checkpoint_dir;
  // A file named on every rank's command line alike: one per rank (rank_file_path.h).
  auto own_file = [&](const char* flag, const std::string& path) {
    const std::string own = RankFilePath(path, coll_.rank(), coll_.world_size());
    if (own != path) {
      std::printf("%s names one file for %d ranks: rank %d writes %s\n", flag, coll_.world_size(),
                  coll_.rank(), own.c_str());
    }
    return own;
  };
  metrics_.Open(o_.metrics_file.empty() ? MetricsPathFor("", o_.logs, coll_.rank())
                                        : own_file("--metrics-file", o_.metrics_file));
  sample_log_.Open(o_.log_sample_ids);
  display_ = std::make_unique<ProgressDisplay>(stdout, o_.log_every_n_steps);
  // --timeline-path, else DTRAIN_TIMELINE (dtrain launch --timeline), else HOROVOD_TIMELINE
  // (rank 0); --timeline-mark-cycles or HOROVOD_TIMELINE_MARK_CYCLES=1 adds CYCLE_START marks.
  if (!GlobalTimeline().enabled()) {
    std::string path =
        o_.timeline_path.empty() ? std::string() : own_file("--timeline-path", o_.timeline_path);
    if (path.empty() && o_.timeline && !std::getenv("DTRAIN_TIMELINE")) {
      path = logs + "/timeline/rank-" + std::to_string(coll_.rank()) + ".json";
    }
    GlobalTimeline().OpenFromEnvironment(coll_.rank(), coll_.host(), path, o_.timeline_mark_cycles);
  }
  if (o_.profile_first > 0) {
    const std::string path =
        o_.profile_file.empty()
            ? logs + "/profiler/rank-" + std::to_string(coll_.rank()) + ".pt.trace.json"
            : own_file("--profile-file", o_.profile_file);
    profile_ = std::make_unique<StepProfile>(o_.profile_first, o_.profile_last, path, device_);
  }
}

void Trainer::BuildModelAndOptimizer() {
  model_ = ClipModel(o_.model_config);
  if (!o_.pretrained.empty()) {
    LoadOpenClipWeights(model_, o_.pretrained);
    std::printf("pretrained: weights from %s\n", o_.pretrained.c_str());
  }
  model_->to(device_);
  tokenizer_ = MakeTokenizer(o_.model_config.text, o_.bpe_vocab);
  flat_ = std::make_unique<FlatParameters>(WeightDecayGroups(*model_));
  optimizer_ = MakeFlatAdamW(
      *flat_, torch::optim::AdamWOptions(o_.lr).betas({o_.beta1, o_.beta2}).eps(o_.eps), o_.wd);
}

void Trainer::PlaceCheckpoints() {
  if (o_.save_frequency <= 0 && o_.save_every_n_steps <= 0 && !o_.save_most_recent) return;
  const std::vector<int> keepers =
      CheckpointKeepers(coll_, checkpoint_dir_, ReadDistEnvFromProcess().local_rank);
  keeps_checkpoints_ = std::find(keepers.begin(), keepers.end(), coll_.rank()) != keepers.end();
  if (coll_.rank() == 0 && keepers.size() > 1) {
    std::printf("checkpoints: written by %s (their nodes do not share rank 0's %s)\n",
                RankList(keepers).c_str(), checkpoint_dir_.c_str());
  }
  if (!keeps_checkpoints_) return;
  const RemovedCheckpointParts parts = RemoveAbandonedCheckpointParts(checkpoint_dir_);
  for (const std::string& path : parts.paths) {
    std::printf("checkpoints: removed %s, the part of a checkpoint whose writer was killed\n",
                path.c_str());
  }
  if (parts.paths.size() > 1) {
    std::printf("checkpoints: %zu abandoned parts removed, %.1f MB\n", parts.paths.size(),
                static_cast<double>(parts.bytes) / 1e6);
  }
}

void Trainer::Resume() {
  if (o_.resume.empty()) return;
  const std::string path = ResolveResumePath(o_.resume, checkpoint_dir_);
  std::string unreadable;  // why this rank's own copy could not be loaded
  const int64_t own = LoadOwnCheckpoint(path, &unreadable);
  const std::vector<int64_t> steps = coll_.GatherFromRanks(own);
  const ResumePlan plan = PlanResume(steps);
  if (plan.step < 0) {
    StartWithoutCheckpoint(steps, unreadable);
    return;
  }
  std::string from = path;
  if (plan.send) from = TakeNewestCheckpoint(plan, own, path, unreadable);
  std::printf("resumed from %s: epoch %lld, step %lld\n", from.c_str(),
              static_cast<long long>(progress_.epoch), static_cast<long long>(progress_.step));
  if (progress_.epoch_samples > 0) {
    std::printf(
        "resume: epoch %lld continues after its first %lld samples (written by %lld rank(s), "
        "global batch %lld; now %d rank(s), global batch %lld)\n",
        static_cast<long long>(progress_.epoch + 1),
        static_cast<long long>(progress_.epoch_samples),
        static_cast<long long>(progress_.world_size),
        static_cast<long long>(progress_.global_batch), coll_.world_size(),
        static_cast<long long>(GlobalBatch()));
  }
}

int64_t Trainer::LoadOwnCheckpoint(const std::string& path, std::string* unreadable) {
  if (path.empty()) return kNoCheckpoint;
  try {
    int64_t layout = 0;
    progress_ = LoadCheckpoint(path, *model_, *optimizer_, &layout);
    AdoptFlatLayout(layout, path);
    return progress_.step;
  } catch (const std::exception& e) {
    // With ranks, another node's copy may stand in for this one (a bad disk, a file cut short
    // by a crash of the file system); it overwrites whatever this load had restored.
    if (coll_.world_size() == 1) throw;
    *unreadable = e.what();
    progress_ = TrainProgress{};
    return kUnreadableCheckpoint;
  }
}

void Trainer::StartWithoutCheckpoint(const std::vector<int64_t>& steps,
                                     const std::string& unreadable) {
  if (!unreadable.empty()) throw std::runtime_error(unreadable + "; no other rank holds a copy");
  std::vector<int> failed;
  for (size_t r = 0; r < steps.size(); ++r) {
    if (steps[r] == kUnreadableCheckpoint) failed.push_back(static_cast<int>(r));
  }
  if (!failed.empty()) {
    throw std::runtime_error("the checkpoint of " + RankList(failed) +
                             " could not be read (its log says why), and no rank holds another");
  }
  const std::string where = coll_.world_size() > 1 ? " on any rank's node" : "";
  if (o_.resume != "latest") {
    throw std::runtime_error(o_.resume + ": --resume checkpoint not found" + where);
  }
  std::printf("resume: no checkpoint in %s%s, starting fresh\n", checkpoint_dir_.c_str(),
              where.c_str());
}

std::string Trainer::TakeNewestCheckpoint(const ResumePlan& plan, int64_t own,
                                          const std::string& path, const std::string& unreadable) {
  // Rank `source` holds the newest; a rank with an older one or none takes it from there.
  const auto sent_at = TrainerClock::now();
  std::string bytes = coll_.rank() == plan.source ? ReadCheckpointBytes(path) : std::string();
  coll_.BroadcastBytes(bytes, plan.source);
  std::printf(
      "resume: rank %d sent its checkpoint of step %lld to the ranks without it "
      "(%.1f MB, read and sent in %.2f s)\n",
      plan.source, static_cast<long long>(plan.step), static_cast<double>(bytes.size()) / 1e6,
      SecondsSince(sent_at));
  if (own >= plan.step) return path;
  std::string from = "rank " + std::to_string(plan.source) + "'s checkpoint";
  int64_t layout = 0;
  progress_ = LoadCheckpointBytes(bytes, from, *model_, *optimizer_, &layout);
  AdoptFlatLayout(layout, from);
  if (own == kUnreadableCheckpoint) return from + " (" + unreadable + ")";
  if (own == kNoCheckpoint) return from + " (none in " + checkpoint_dir_ + " here)";
  return from + " (the one in " + checkpoint_dir_ + " here is of step " + std::to_string(own) + ")";
}

void Trainer::AdoptFlatLayout(int64_t layout, const std::string& name) {
  if (layout == static_cast<int64_t>(flat_->layout())) return;
  if (layout != static_cast<int64_t>(FlatLayout::kModelOrder)) {
    throw std::runtime_error(name + ": its optimizer state is in flat layout " +
                             std::to_string(layout) +
                             ", which this dtrain-clip does not know (written by a newer one?)");
  }
  flat_->MomentsFromModelOrder(*optimizer_);  // written before the aligned layout
}

void Trainer::OpenData() {
  DataOptions data = o_.data;
  // 8-bit pixels normalised on the device by default on GPUs; the loaders normalise on the CPU.
  data.raw_pixels = o_.pixels.empty() ? device_.is_cuda() : o_.pixels == "uint8";
  upload_ = std::make_unique<BatchUpload>(device_, data.channels);
  data.rank = coll_.rank();
  data.world_size = coll_.world_size();
  source_ = MakeBatchSource(data);
  stager_ = std::make_unique<BatchStager>(*source_, [this](StagedBatch& b) { StageBatch(b); });
  int64_t batches = source_->BatchesPerEpoch();
  if (batches < 0) {  // streamed shards: estimate from --train-num-samples
    if (data.train_num_samples <= 0) {
      throw std::runtime_error("--dataset-type " + data.dataset_type +
                               " needs --train-num-samples to plan the learning-rate schedule");
    }
    batches = data.train_num_samples / (static_cast<int64_t>(data.batch_size) * data.world_size);
  }
  steps_per_epoch_ = batches / o_.accum_freq;
  if (steps_per_epoch_ < 1) {
    throw std::runtime_error("an epoch has " + std::to_string(batches) +
                             " batches per rank: fewer than --accum-freq " +
                             std::to_string(o_.accum_freq) + "; lower --batch-size or add data");
  }
  schedule_ = CosineLrSchedule{o_.lr, o_.warmup, steps_per_epoch_ * o_.epochs};
}

void Trainer::SetUpCapturedStep() {
  CudaGraphsRun run;
  run.cuda = device_.is_cuda();
  run.world_size = coll_.world_size();
  run.backend = coll_.backend();
  run.hierarchical_allreduce = o_.hierarchical_allreduce;
  run.accum_freq = o_.accum_freq;
  run.grad_clip_norm = o_.grad_clip_norm;
  CudaGraphsChoice choice = ChooseCudaGraphs(o_.cuda_graphs, run);
  cuda_graphs_note_ = choice.note;
  SetUpWeightCopies(choice.static_step);
  if (!choice.static_step) return;
  fused_adamw_ = std::make_unique<FusedAdamW>(*optimizer_);
  std::vector<torch::Tensor> flat_gradients;
  for (const torch::Tensor& buffer : flat_->buffers()) flat_gradients.push_back(buffer.grad());
  static_sync_buckets_ = coll_.UseStaticGradientSync(flat_gradients);
  // The text cut to a TextLengthBucket: a graph per bucket, up to one per bucket there is.
  const bool whole_text = o_.text_context == "whole";
  captured_step_ = std::make_unique<CapturedStep>(
      MakeGraphTrainStep(model_, *flat_, *fused_adamw_, coll_, o_.precision == "amp_bf16",
                         whole_text, weight_copies_.get()),
      choice.capture, /*warmup_steps=*/3,
      whole_text ? 1 : static_cast<int>(TextLengthBuckets(tokenizer_->context_length())));
}

void Trainer::SetUpGpuSpans() {
  if (!o_.gpu_timed_spans) return;
  if (!GlobalTimeline().enabled()) {
    gpu_spans_note_ = "nothing to write them to (no --timeline)";
    return;
  }
  gpu_clock_ = MakeCudaEventClock(device_);
  if (!gpu_clock_) {
    gpu_spans_note_ = "host timing only (not on CUDA)";
    return;
  }
  // 64 steps of four phases before a recording waits for the GPU; Poll() at each step's start
  // normally empties it long before.
  gpu_spans_ = std::make_unique<DeviceSpanRing>(*gpu_clock_, 256, [](const DeviceSpan& span) {
    GlobalTimeline().SpanAt(span.track, span.activity, span.begin_us, span.end_us);
  });
  gpu_spans_note_ = "CUDA events on the gpu track";
}

void Trainer::SetUpWeightCopies(bool static_step) {
  if (!o_.weight_copies || o_.precision != "amp_bf16") return;
  weight_copies_ = std::make_unique<WeightCopies>(MatrixWeights(*model_), torch::kBFloat16);
  weight_copies_note_ = std::to_string(weight_copies_->size()) +
                        " matrix weights and biases cast to bfloat16 once a step";
  // The captured step, and the eager one on one rank with one micro-batch, take the copies'
  // gradients after backward (HandOverGradients). With ranks the gradient sync sends each
  // gradient as backward completes it, and micro-batches add theirs up in float32: each copy's
  // gradient is added into its parameter's as backward makes it.
  if (!static_step && (coll_.world_size() > 1 || o_.accum_freq > 1)) {
    weight_copies_->AddGradientsIntoParameters(
        [this](const torch::Tensor& parameter) { coll_.GradientReady(parameter); });
    weight_copies_note_ += ", their gradients added into the float32 ones as backward makes them";
  }
}

void Trainer::SetUpStopOnSignal() {
  const bool checkpoints =
      o_.save_frequency > 0 || o_.save_most_recent || o_.save_every_n_steps > 0;
  if (!checkpoints) return;                  // nothing to save: a signal ends the process at once
  stop_signals_ = StopSignals::Installed();  // by `dtrain-clip train` with --save-on-signal on
  if (stop_signals_) stop_agreement_ = std::make_unique<StopAgreement>(coll_);
}

bool Trainer::StopAgreedAfterStep() {
  if (!stop_agreement_) return false;
  stop_signals_->Arm();
  stop_signals_->StepDone(last_step_s_);
  stop_signal_ = stop_agreement_->AfterStep(stop_signals_->requested());
  return stop_signal_ != 0;
}

int Trainer::Run() {
  const auto wall_start = TrainerClock::now();
  SetUpRuntime();
  SetFusedBiasGrad(o_.fused_bias_grad);
  BuildModelAndOptimizer();
  PlaceCheckpoints();
  Resume();
  auto named = model_->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> named_params;
  for (const auto& item : named) named_params.emplace_back(item.key(), item.value());
  coll_.BroadcastParameters(named_params);
  OpenData();
  SetUpCapturedStep();
  // Eager on CUDA too: one fused launch per group instead of a dozen elementwise passes over
  // every parameter (3.1 ms of a 57 ms ViT-B/32 step on an H200 with torch::optim::AdamW).
  if (!fused_adamw_ && device_.is_cuda()) fused_adamw_ = std::make_unique<FusedAdamW>(*optimizer_);
  SetUpGpuSpans();
  SetUpStopOnSignal();
  if (o_.text_context == "whole") model_->text->set_whole_context(true);
  model_->text->set_cut_by_caller(true);  // NextBatch cuts, unless the tower takes it whole
  step_scalars_ = std::make_unique<StepScalars>(device_);
  if (coll_.rank() == 0) {
    std::printf(
        "dtrain-clip: %s (%lld parameters), %s data, batch %d x %d rank(s), %lld steps/epoch, "
        "%d epoch(s), %s on %s, %d thread(s)\n",
        o_.model_config.name.c_str(), static_cast<long long>(ParameterCount(*model_)),
        o_.data.dataset_type.c_str(), o_.data.batch_size * o_.accum_freq, coll_.world_size(),
        static_cast<long long>(steps_per_epoch_), o_.epochs, o_.precision.c_str(),
        device_.str().c_str(), torch::get_num_threads());
    if (!cuda_graphs_note_.empty()) {
      std::printf("cuda-graphs %s: %s\n", o_.cuda_graphs.c_str(), cuda_graphs_note_.c_str());
    }
    if (!gpu_spans_note_.empty()) std::printf("gpu-timed-spans: %s\n", gpu_spans_note_.c_str());
    if (!weight_copies_note_.empty()) {
      std::printf("weight-copies: %s\n", weight_copies_note_.c_str());
    }
    if (o_.fused_bias_grad) {
      std::printf("fused-bias-grad: %s\n",
                  device_.is_cuda() ? "bias gradients from the weight gradients' cuBLASLt products "
                                      "where they apply"
                                    : "no effect on the CPU (cuBLASLt's epilogue is CUDA's)");
    }
    std::fflush(stdout);
  }
  bool stopped = false;
  for (int epoch = static_cast<int>(progress_.epoch); epoch < o_.epochs && !stopped; ++epoch) {
    const int64_t steps_this_epoch = StartEpoch(epoch);
    step_clock_ = TrainerClock::now();
    int64_t steps = 0;
    while (steps < steps_this_epoch) {
      if (o_.max_steps > 0 && progress_.step >= o_.max_steps) {
        stopped = true;
        break;
      }
      if (!TrainStep(epoch)) break;
      ++steps;
      SaveStepCheckpoint();
      if (StopAgreedAfterStep()) break;
    }
    if (stop_agreement_) {  // every rank reads the sums still in flight
      const int later = stop_agreement_->Drain();
      if (stop_signal_ == 0) stop_signal_ = later;
    }
    FlushStepLine();
    stager_->Stop();  // what it staged ahead is not this run's (or this epoch's) to train on
    if (stop_signal_ != 0) {
      SaveStopCheckpoint();
      break;
    }
    if (stopped) break;
    progress_.epoch = epoch + 1;
    progress_.epoch_samples = 0;
    display_->Break();
    coll_.Barrier();
    SaveCheckpoints(epoch);
    Evaluate(epoch);
    coll_.Barrier();
  }
  if (stop_signals_) stop_signals_->Disarm();
  display_->Break();
  if (profile_) profile_->Finish();
  int64_t gpu_spans_resolved = 0, gpu_spans_forced_waits = 0;
  if (gpu_spans_) {
    gpu_spans_->Drain();
    gpu_spans_resolved = gpu_spans_->resolved();
    gpu_spans_forced_waits = gpu_spans_->forced_waits();
    gpu_spans_.reset();
  }
  const double skipped = coll_.SumOverRanks(static_cast<double>(source_->SkippedSamples()));
  const std::string hash = ParameterHash(*model_);
  const double samples_per_s = train_seconds_ > 0 ? samples_this_run_ / train_seconds_ : 0;
  const HeartbeatCost heartbeat = GlobalHeartbeat().Cost();
  MetricsLine end;
  end.Add("event", "end")
      .Add("step", progress_.step)
      .Add("epoch", progress_.epoch)
      .Add("samples", samples_this_run_)
      .Add("samples_per_s", samples_per_s)
      .Add("train_s", train_seconds_)
      .Add("wall_s", SecondsSince(wall_start))
      .Add("skipped_samples", static_cast<int64_t>(skipped))
      .Add("param_hash", hash)
      .Add("heartbeat_path_ms", heartbeat.path_ms)
      .Add("heartbeat_writer_cpu_ms", heartbeat.writer_cpu_ms)
      .Add("heartbeat_beats", heartbeat.beats);
  if (captured_step_) {
    end.Add("graph_captured", captured_step_->captured())
        .Add("graph_warmup_steps", captured_step_->warmup_runs())
        .Add("graph_replays", captured_step_->replays())
        .Add("graph_shapes", captured_step_->shapes())
        .Add("graph_eager_fallbacks", captured_step_->eager_fallbacks())
        .Add("graph_sync_buckets", static_sync_buckets_);
  }
  if (stop_agreement_ && coll_.world_size() > 1) {
    end.Add("stop_agreement_ms", stop_agreement_->seconds() * 1000);
  }
  if (stop_signal_ != 0) end.Add("stopped_by", StopSignals::Name(stop_signal_));
  if (o_.gpu_timed_spans) {
    end.Add("gpu_spans_resolved", gpu_spans_resolved)
        .Add("gpu_spans_forced_waits", gpu_spans_forced_waits);
  }
  metrics_.Write(end);
  std::printf("done: %lld steps, %.1f samples/s, %.1f s training, param hash %s\n",
              static_cast<long long>(progress_.step), samples_per_s, train_seconds_, hash.c_str());
  std::fflush(stdout);
  return 0;
}

int RunTraining(const TrainOptions& options, TrainCollectives& collectives) {
  return Trainer(options, collectives).Run();
}

}  // namespace dtrain::clip
