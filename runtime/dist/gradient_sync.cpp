#include "runtime/dist/gradient_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "runtime/dist/fusion_buffer.h"
#include "runtime/formats/json_object.h"
#include "runtime/trace/timeline.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain::clip {

// A planned bucket on its way: reduced in place, as one view, when it is consecutive links of
// one chain (gradients end to end in one buffer, agreed by all ranks) or one contiguous
// gradient; any other bucket goes through a fusion buffer: copied in, reduced, averaged on the
// way back out.
struct GradientSync::Bucket {
  std::vector<size_t> members;
  int chain = -1;                    // members are consecutive links of chains_[chain]
  bool copied = false;               // this rank reduces it through a fusion buffer
  std::vector<torch::Tensor> grads;  // the members' .grad, in order
  torch::Tensor flat;  // what the collective reduces: a view of the gradients, or a buffer
  std::unique_ptr<PendingCollective> pending;
  std::string track;
};

namespace {

std::string DtypeName(const torch::Tensor& t) {
  return c10::toString(t.scalar_type());
}

double EnvNumber(const char* name, double fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  double parsed = std::strtod(value, &end);
  if (*end != '\0' || parsed < 0) {
    throw std::runtime_error(std::string("environment variable ") + name + "='" + value +
                             "' is not a non-negative number");
  }
  return parsed;
}

}  // namespace

GradientSyncOptions GradientSyncOptionsFromEnvironment() {
  GradientSyncOptions options;
  options.fusion_threshold_bytes = static_cast<int64_t>(
      EnvNumber("HOROVOD_FUSION_THRESHOLD", static_cast<double>(options.fusion_threshold_bytes)));
  options.cycle_time_ms = EnvNumber("HOROVOD_CYCLE_TIME", options.cycle_time_ms);
  return options;
}

GradientSync::GradientSync(std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
                           std::unique_ptr<Communicator> comm, GradientSyncOptions options)
    : comm_(std::move(comm)), options_(options) {
  for (auto& [name, param] : named_parameters) {
    if (!param.requires_grad()) continue;
    Entry entry;
    entry.name = name;
    entry.param = param;
    entry.bytes = param.numel() * param.element_size();
    entry.accumulator = torch::autograd::impl::grad_accumulator(param);
    if (!entry.accumulator) {
      throw std::runtime_error("gradient sync: parameter " + name +
                               " is not a leaf tensor; only leaves have gradients to average");
    }
    index_of_[param.unsafeGetTensorImpl()] = entries_.size();
    entries_.push_back(std::move(entry));
  }
  idle_count_ = entries_.size();
  controller_ = std::make_unique<SyncController>(
      *comm_, entries_.empty() ? torch::Device(torch::kCPU) : entries_.front().param.device());
  if (options_.broadcast_parameters) {
    torch::NoGradGuard no_grad;
    for (Entry& entry : entries_) {
      torch::Tensor data = entry.param.detach();
      comm_->Broadcast(data, 0);
    }
  }
  std::vector<torch::Tensor> params;
  for (const Entry& entry : entries_) {
    params.push_back(entry.param);
    const torch::Device device = entry.param.device();
    slots_.push_back({entry.bytes, (static_cast<int64_t>(entry.param.scalar_type()) << 24) |
                                       (static_cast<int64_t>(device.type()) << 8) |
                                       (device.index() + 1)});
  }
  chains_ = controller_->AgreeOnChains(params);
  // A post hook of the gradient accumulator runs once autograd has added this backward's
  // gradient into .grad (in place when .grad is a view of a flat buffer): the total is there.
  for (size_t i = 0; i < entries_.size(); ++i) {
    entries_[i].hook = entries_[i].accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              MarkReady(i);
              return outputs;
            }));
  }
  loop_ = std::thread([this] { Loop(); });
}

GradientSync::~GradientSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  work_.notify_all();
  loop_.join();
  for (Entry& entry : entries_) entry.accumulator->del_post_hook(entry.hook);
}

void GradientSync::MarkReady(size_t index) {
  if (!sync_enabled_) return;
  Entry& entry = entries_[index];
  std::lock_guard<std::mutex> lock(mu_);
  if (entry.state != State::kIdle) return;
  if (!entry.param.grad().defined()) entry.param.mutable_grad() = torch::zeros_like(entry.param);
  entry.grad = entry.param.grad();
  entry.state = State::kReady;
  --idle_count_;
  ++ready_count_;
  if (GlobalTimeline().enabled()) GlobalTimeline().Begin(entry.name, trace::kQueue);
  // The loop cares about the first gradient of a round and about the last one; waking it for
  // every gradient in between would only cost backward context switches.
  if (ready_count_ == 1 || idle_count_ == 0) work_.notify_one();
}

void GradientSync::MarkReady(const torch::Tensor& parameter) {
  auto it = index_of_.find(parameter.unsafeGetTensorImpl());
  if (it != index_of_.end()) MarkReady(it->second);
}

void GradientSync::Synchronize() {
  if (!sync_enabled_) return;
  for (size_t i = 0; i < entries_.size(); ++i) MarkReady(i);  // those backward did not reach
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return !error_.empty() || (idle_count_ == 0 && ready_count_ == 0); });
  if (!error_.empty()) throw std::runtime_error(error_);
  for (Entry& entry : entries_) {
    entry.grad = torch::Tensor();
    entry.state = State::kIdle;
  }
  idle_count_ = entries_.size();
}

// A rank joins a negotiation round only once it has a gradient ready (or wants to stop): a
// gradient goes out only when every rank has it, so nobody needs a round before that, and an
// idle synchroniser (forward, data loading, evaluation) costs no CPU. After waking from idle it
// waits one cycle, so that the gradients backward produces meanwhile go out together; it goes
// at once when no gradient is left to wait for (all ready, e.g. in Synchronize()).
void GradientSync::Loop() {
  auto cycle = std::chrono::microseconds(static_cast<int64_t>(options_.cycle_time_ms * 1000));
  auto next = std::chrono::steady_clock::now();
  try {
    while (true) {
      std::unique_lock<std::mutex> lock(mu_);
      auto has_work = [&] { return stop_requested_ || ready_count_ > 0; };
      auto nothing_to_wait_for = [&] { return stop_requested_ || idle_count_ == 0; };
      bool was_idle = !has_work();
      work_.wait(lock, has_work);
      auto now = std::chrono::steady_clock::now();
      next = was_idle ? now + cycle : std::max(next + cycle, now);
      work_.wait_until(lock, next, nothing_to_wait_for);
      lock.unlock();
      bool stop = false;
      std::vector<size_t> ready = AgreeOnReady(stop);
      if (stop) return;
      if (ready.empty()) continue;
      if (GlobalTimeline().enabled() && GlobalTimeline().mark_cycles()) {
        GlobalTimeline().Instant("cycle", trace::kCycleStart);
      }
      Reduce(PlanBuckets(slots_, chains_, ready, options_.fusion_threshold_bytes));
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::string("gradient allreduce failed on rank ") + std::to_string(comm_->rank()) +
             ": " + e.what();
    done_.notify_all();
  }
}

std::vector<size_t> GradientSync::AgreeOnReady(bool& stop) {
  std::vector<bool> ready_here(entries_.size());
  bool stop_here;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i) ready_here[i] = entries_[i].state == State::kReady;
    stop_here = stop_requested_;
  }
  return controller_->AgreeOnReady(ready_here, stop_here, stop);
}

// Double-buffered: bucket k+1 is started (copied in, if it must be) while bucket k is on the wire.
void GradientSync::Reduce(const std::vector<PlannedBucket>& plan) {
  std::vector<Bucket> buckets(plan.size());
  for (size_t k = 0; k < plan.size(); ++k) {
    buckets[k].members = plan[k].members;
    buckets[k].chain = plan[k].chain;
  }
  int fused = 0;
  for (size_t k = 0; k < buckets.size(); ++k) {
    bool in_place = buckets[k].chain >= 0 || buckets[k].members.size() == 1;
    StartBucket(buckets[k], in_place ? nullptr : &fusion_buffers_[fused++ % 2]);
    if (k > 0) FinishBucket(buckets[k - 1]);
  }
  if (!buckets.empty()) FinishBucket(buckets.back());
}

void GradientSync::StartBucket(Bucket& bucket, torch::Tensor* fusion_buffer) {
  Timeline& timeline = GlobalTimeline();
  int64_t numel = 0, bytes = 0;
  for (size_t index : bucket.members) {
    numel += entries_[index].param.numel();
    bytes += entries_[index].bytes;
    bucket.grads.push_back(entries_[index].grad);
    if (timeline.enabled()) timeline.End(entries_[index].name, trace::kQueue);
  }
  const Entry& first = entries_[bucket.members.front()];
  // In place when this rank's gradients really are one contiguous range (the agreed layout may
  // not hold here, e.g. a .grad replaced since): then the collective reduces a view of them.
  const bool view = fusion_buffer == nullptr && LieEndToEnd(bucket.grads);
  bucket.copied = !view;
  if (bucket.members.size() == 1) {
    bucket.track = first.name;
  } else if (view) {
    bucket.track = "gradient buffer " + std::to_string(bucket.chain);
  } else if (fusion_buffer) {
    bucket.track = "fusion buffer " + std::to_string(fusion_buffer - fusion_buffers_);
  } else {
    bucket.track = "fusion buffer (spare)";
  }
  if (timeline.enabled()) {
    timeline.Begin(bucket.track, trace::kAllreduce,
                   JsonObject()
                       .Add(trace::kArgBytes, bytes)
                       .Add(trace::kArgDtype, DtypeName(first.param))
                       .Add(trace::kArgTensors, bucket.members.size())
                       .Add(trace::kArgInPlace, view)
                       .Body());
  }
  torch::NoGradGuard no_grad;
  if (view) {
    bucket.flat = FlatView(first.grad, numel);
    bytes_in_place_ += bytes;
  } else {
    TimelineSpan span(bucket.track, trace::kMemcpyInFusionBuffer);
    torch::Tensor spare;
    bucket.flat = PackIntoFusionBuffer(fusion_buffer ? *fusion_buffer : spare, bucket.grads,
                                       options_.fusion_threshold_bytes);
    bytes_copied_ += bytes;
  }
  if (timeline.enabled()) timeline.Begin(bucket.track, comm_->allreduce_activity());
  bucket.pending = comm_->AllreduceSumAsync(bucket.flat);
  if (options_.record_buckets) {
    std::lock_guard<std::mutex> lock(log_mu_);
    buckets_issued_.push_back(bucket.members);
  }
  ++allreduces_;
}

std::vector<std::vector<size_t>> GradientSync::buckets_issued() const {
  std::lock_guard<std::mutex> lock(log_mu_);
  return buckets_issued_;
}

void GradientSync::FinishBucket(Bucket& bucket) {
  Timeline& timeline = GlobalTimeline();
  bucket.pending->Wait();
  if (timeline.enabled()) timeline.End(bucket.track, comm_->allreduce_activity());
  torch::NoGradGuard no_grad;
  const bool divide = !options_.gradients_prescaled && comm_->size() > 1;
  torch::Tensor world;
  if (divide) {
    world = torch::scalar_tensor(static_cast<double>(comm_->size()),
                                 bucket.flat.options().device(torch::kCPU));
  }
  if (!bucket.copied) {
    if (divide) bucket.flat.div_(world);  // the gradients themselves: averaged in place
  } else {
    // Averaging (when the sum is not the average already) and copying out in one pass.
    TimelineSpan span(bucket.track, trace::kMemcpyOutFusionBuffer);
    UnpackFromFusionBuffer(bucket.flat, bucket.grads, world);
  }
  bucket.flat = torch::Tensor();
  bucket.grads.clear();
  if (timeline.enabled()) timeline.End(bucket.track, trace::kAllreduce);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t index : bucket.members) entries_[index].state = State::kDone;
  ready_count_ -= bucket.members.size();
  done_.notify_all();
}

}  // namespace dtrain::clip
