#include "runtime/gradient_sync.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "runtime/timeline.h"

namespace dtrain::clip {

// A group of ready gradients reduced by one collective: through a fusion buffer when it holds
// more than one tensor, in the tensor's own result otherwise.
struct GradientSync::Bucket {
  std::vector<size_t> members;
  torch::Tensor flat;
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
    entry.result = torch::empty_like(param, torch::MemoryFormat::Contiguous);
    entry.bytes = param.numel() * param.element_size();
    entries_.push_back(std::move(entry));
  }
  if (options_.broadcast_parameters) {
    torch::NoGradGuard no_grad;
    for (Entry& entry : entries_) {
      torch::Tensor data = entry.param.detach();
      comm_->Broadcast(data, 0);
    }
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    entries_[i].hook = entries_[i].param.register_hook([this, i](torch::Tensor grad) {
      Queue(i, grad);
      return grad;
    });
  }
  loop_ = std::thread([this] { Loop(); });
}

GradientSync::~GradientSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  loop_.join();
  for (Entry& entry : entries_) entry.param.remove_hook(entry.hook);
}

void GradientSync::Queue(size_t index, const torch::Tensor& grad) {
  if (!sync_enabled_) return;
  Entry& entry = entries_[index];
  // With --accum-freq the earlier micro-batches' gradients are already in .grad.
  torch::Tensor total = entry.param.grad().defined() ? entry.param.grad() + grad : grad;
  std::lock_guard<std::mutex> lock(mu_);
  if (entry.state != State::kIdle) return;
  entry.grad = total.detach();
  entry.state = State::kReady;
  if (GlobalTimeline().enabled()) GlobalTimeline().Begin(entry.name, "QUEUE");
}

void GradientSync::Synchronize() {
  if (!sync_enabled_) return;
  std::unique_lock<std::mutex> lock(mu_);
  for (Entry& entry : entries_) {
    if (entry.state != State::kIdle) continue;  // backward did not reach it: send what is there
    torch::Tensor grad = entry.param.grad();
    entry.grad = grad.defined() ? grad.detach() : torch::zeros_like(entry.param);
    entry.state = State::kReady;
    if (GlobalTimeline().enabled()) GlobalTimeline().Begin(entry.name, "QUEUE");
  }
  done_.wait(lock, [&] {
    if (!error_.empty()) return true;
    for (const Entry& entry : entries_) {
      if (entry.state != State::kDone) return false;
    }
    return true;
  });
  if (!error_.empty()) throw std::runtime_error(error_);
  torch::NoGradGuard no_grad;
  for (Entry& entry : entries_) {
    // The average becomes .grad without a copy. The next step's average goes to the other of
    // two result tensors we own: never the .grad that the next backward accumulates into (which
    // may be this result, or a tensor the caller put back, e.g. a view of a flat buffer).
    entry.param.mutable_grad() = entry.result;
    if (!entry.spare.defined()) {
      entry.spare = torch::empty_like(entry.param, torch::MemoryFormat::Contiguous);
    }
    std::swap(entry.result, entry.spare);
    entry.grad = torch::Tensor();
    entry.state = State::kIdle;
  }
}

void GradientSync::Loop() {
  auto cycle = std::chrono::microseconds(static_cast<int64_t>(options_.cycle_time_ms * 1000));
  auto next = std::chrono::steady_clock::now();
  try {
    while (true) {
      next = std::max(next + cycle, std::chrono::steady_clock::now());
      std::this_thread::sleep_until(next);
      bool stop = false;
      std::vector<size_t> ready = AgreeOnReady(stop);
      if (stop) return;
      if (ready.empty()) continue;
      if (GlobalTimeline().enabled() && GlobalTimeline().mark_cycles()) {
        GlobalTimeline().Instant("cycle", "CYCLE_START");
      }
      Reduce(MakeBuckets(ready));
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::string("gradient allreduce failed on rank ") + std::to_string(comm_->rank()) +
             ": " + e.what();
    done_.notify_all();
  }
}

// Horovod's bit-vector negotiation: one small allreduce per cycle of "which gradients are ready
// here" (plus "I want to stop"); a gradient goes out once every rank has it.
std::vector<size_t> GradientSync::AgreeOnReady(bool& stop) {
  size_t n = entries_.size();
  torch::Tensor mask = torch::zeros({static_cast<int64_t>(n + 1)}, torch::kInt32);
  int32_t* bits = mask.data_ptr<int32_t>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < n; ++i) bits[i] = entries_[i].state == State::kReady ? 1 : 0;
    bits[n] = stop_requested_ ? 1 : 0;
  }
  comm_->AllreduceSum(mask);
  int32_t everyone = comm_->size();
  stop = bits[n] == everyone;
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (bits[i] == everyone) ready.push_back(i);
  }
  return ready;
}

std::vector<std::vector<size_t>> GradientSync::MakeBuckets(const std::vector<size_t>& ready) const {
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = 0;
  for (size_t index : ready) {
    const Entry& entry = entries_[index];
    bool fits = !buckets.empty() && options_.fusion_threshold_bytes > 0 &&
                bytes + entry.bytes <= options_.fusion_threshold_bytes &&
                entries_[buckets.back().front()].param.scalar_type() == entry.param.scalar_type() &&
                entries_[buckets.back().front()].param.device() == entry.param.device();
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(index);
    bytes += entry.bytes;
  }
  return buckets;
}

// Double-buffered: bucket k+1 is copied in while bucket k is on the wire.
void GradientSync::Reduce(const std::vector<std::vector<size_t>>& members) {
  std::vector<Bucket> buckets(members.size());
  for (size_t k = 0; k < buckets.size(); ++k) {
    buckets[k].members = members[k];
    StartBucket(buckets[k], fusion_buffers_[k % 2]);
    if (k > 0) FinishBucket(buckets[k - 1]);
  }
  if (!buckets.empty()) FinishBucket(buckets.back());
}

void GradientSync::StartBucket(Bucket& bucket, torch::Tensor& fusion_buffer) {
  Timeline& timeline = GlobalTimeline();
  int64_t numel = 0, bytes = 0;
  for (size_t index : bucket.members) {
    numel += entries_[index].param.numel();
    bytes += entries_[index].bytes;
    if (timeline.enabled()) timeline.End(entries_[index].name, "QUEUE");
  }
  const Entry& first = entries_[bucket.members.front()];
  bool fused = bucket.members.size() > 1;
  bucket.track =
      fused ? "fusion buffer " + std::to_string(&fusion_buffer - fusion_buffers_) : first.name;
  if (timeline.enabled()) {
    timeline.Begin(bucket.track, "ALLREDUCE",
                   "\"bytes\":" + std::to_string(bytes) + ",\"dtype\":\"" + DtypeName(first.param) +
                       "\",\"tensors\":" + std::to_string(bucket.members.size()));
  }
  torch::NoGradGuard no_grad;
  if (!fused) {
    bucket.flat = first.result.view({-1});
    bucket.flat.copy_(first.grad.reshape({-1}));
  } else {
    TimelineSpan span(bucket.track, "MEMCPY_IN_FUSION_BUFFER");
    if (!fusion_buffer.defined() || fusion_buffer.numel() < numel ||
        fusion_buffer.scalar_type() != first.param.scalar_type() ||
        fusion_buffer.device() != first.param.device()) {
      int64_t capacity = options_.fusion_threshold_bytes / first.param.element_size();
      fusion_buffer = torch::empty({std::max(numel, capacity)}, first.param.options());
    }
    bucket.flat = fusion_buffer.narrow(0, 0, numel);
    int64_t offset = 0;
    for (size_t index : bucket.members) {
      const Entry& entry = entries_[index];
      bucket.flat.narrow(0, offset, entry.param.numel()).copy_(entry.grad.reshape({-1}));
      offset += entry.param.numel();
    }
  }
  if (timeline.enabled()) timeline.Begin(bucket.track, comm_->allreduce_activity());
  bucket.pending = comm_->AllreduceSumAsync(bucket.flat);
  ++allreduces_;
}

void GradientSync::FinishBucket(Bucket& bucket) {
  Timeline& timeline = GlobalTimeline();
  bucket.pending->Wait();
  if (timeline.enabled()) timeline.End(bucket.track, comm_->allreduce_activity());
  torch::NoGradGuard no_grad;
  torch::Tensor world = torch::scalar_tensor(static_cast<double>(comm_->size()),
                                             bucket.flat.options().device(torch::kCPU));
  if (bucket.members.size() == 1) {
    bucket.flat.div_(world);
  } else {
    // Averaging and copying out in one pass over the buffer.
    TimelineSpan span(bucket.track, "MEMCPY_OUT_FUSION_BUFFER");
    int64_t offset = 0;
    for (size_t index : bucket.members) {
      Entry& entry = entries_[index];
      torch::Tensor out = entry.result.view({-1});
      torch::div_out(out, bucket.flat.narrow(0, offset, entry.param.numel()), world);
      offset += entry.param.numel();
    }
  }
  if (timeline.enabled()) timeline.End(bucket.track, "ALLREDUCE");
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t index : bucket.members) {
    entries_[index].state = State::kDone;
    entries_[index].grad = torch::Tensor();
  }
  done_.notify_all();
}

}  // namespace dtrain::clip
