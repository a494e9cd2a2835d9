#include "runtime/gradient_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "runtime/timeline.h"

namespace dtrain::clip {

// A group of ready gradients reduced by one collective. A bucket of consecutive links of one
// chain (gradients end to end in one buffer, agreed by all ranks) is reduced in place, as one
// view; so is a bucket of one contiguous gradient. Any other bucket goes through a fusion buffer:
// copied in, reduced, averaged on the way back out.
struct GradientSync::Bucket {
  std::vector<size_t> members;
  int chain = -1;       // members are consecutive links of chains_[chain]
  bool copied = false;  // this rank reduces it through a fusion buffer
  torch::Tensor flat;   // what the collective reduces: a view of the gradients, or a buffer
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
    entries_.push_back(std::move(entry));
  }
  idle_count_ = entries_.size();
  if (!entries_.empty()) control_device_ = entries_.front().param.device();
  if (options_.broadcast_parameters) {
    torch::NoGradGuard no_grad;
    for (Entry& entry : entries_) {
      torch::Tensor data = entry.param.detach();
      comm_->Broadcast(data, 0);
    }
  }
  AgreeOnChains();
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

// Which gradient starts where another ends, in the same storage: a chain of such gradients is
// reduced as one view. Every rank must cut the same buckets, so a link counts only if all ranks
// have it (two small allreduces: the successors, then whether anyone differs from the sum).
void GradientSync::AgreeOnChains() {
  const int64_t n = static_cast<int64_t>(entries_.size());
  struct Place {
    const void* storage;
    const char* begin;
    size_t index;
  };
  std::vector<Place> places;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const torch::Tensor& grad = entries_[i].param.grad();
    if (!grad.defined() || !grad.is_contiguous() || grad.numel() == 0) continue;
    places.push_back(
        {grad.storage().unsafeGetStorageImpl(), static_cast<const char*>(grad.data_ptr()), i});
  }
  std::sort(places.begin(), places.end(), [](const Place& a, const Place& b) {
    return a.storage != b.storage ? std::less<const void*>()(a.storage, b.storage)
                                  : a.begin < b.begin;
  });
  torch::Tensor next = torch::full({n}, -1, torch::kInt64);  // successor index, -1 = none
  for (size_t k = 0; k + 1 < places.size(); ++k) {
    const Entry& here = entries_[places[k].index];
    const Entry& there = entries_[places[k + 1].index];
    if (places[k].storage == places[k + 1].storage &&
        places[k].begin + here.bytes == places[k + 1].begin &&
        here.param.scalar_type() == there.param.scalar_type()) {
      next[static_cast<int64_t>(places[k].index)] = static_cast<int64_t>(places[k + 1].index);
    }
  }
  if (n == 0) return;
  torch::Tensor sum = next.clone();
  AllreduceControl(sum);
  torch::Tensor differs = (sum != next * comm_->size()).to(torch::kInt32);
  AllreduceControl(differs);
  const int64_t* successor = next.data_ptr<int64_t>();
  const int32_t* disagreed = differs.data_ptr<int32_t>();
  std::vector<bool> has_predecessor(entries_.size(), false);
  for (int64_t i = 0; i < n; ++i) {
    if (successor[i] >= 0 && disagreed[i] == 0) has_predecessor[successor[i]] = true;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (has_predecessor[i]) continue;
    std::vector<size_t> chain{static_cast<size_t>(i)};
    for (int64_t j = i; successor[j] >= 0 && disagreed[j] == 0; j = successor[j]) {
      chain.push_back(static_cast<size_t>(successor[j]));
    }
    if (chain.size() > 1) chains_.push_back(std::move(chain));
  }
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
  if (GlobalTimeline().enabled()) GlobalTimeline().Begin(entry.name, "QUEUE");
  // The loop cares about the first gradient of a round and about the last one; waking it for
  // every gradient in between would only cost backward context switches.
  if (ready_count_ == 1 || idle_count_ == 0) work_.notify_one();
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
        GlobalTimeline().Instant("cycle", "CYCLE_START");
      }
      std::vector<Bucket> buckets = MakeBuckets(ready);
      Reduce(buckets);
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::string("gradient allreduce failed on rank ") + std::to_string(comm_->rank()) +
             ": " + e.what();
    done_.notify_all();
  }
}

void GradientSync::AllreduceControl(torch::Tensor& values) {
  if (control_device_.is_cpu()) {
    comm_->AllreduceSum(values);
    return;
  }
  torch::Tensor on_device = values.to(control_device_);
  comm_->AllreduceSum(on_device);
  values.copy_(on_device);
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
  AllreduceControl(mask);
  int32_t everyone = comm_->size();
  stop = bits[n] == everyone;
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (bits[i] == everyone) ready.push_back(i);
  }
  return ready;
}

// The same on every rank (it reads only the agreed ready set and chains): consecutive ready
// links of a chain form in-place buckets up to the threshold (a lone link is a bucket of its own:
// a flat buffer's gradients are never copied); the other gradients are packed into fusion
// buckets in index order, as Horovod does.
std::vector<GradientSync::Bucket> GradientSync::MakeBuckets(
    const std::vector<size_t>& ready) const {
  const int64_t threshold = options_.fusion_threshold_bytes;
  std::vector<bool> is_ready(entries_.size(), false), in_chain(entries_.size(), false);
  for (size_t index : ready) is_ready[index] = true;
  std::vector<Bucket> buckets;
  for (size_t c = 0; c < chains_.size(); ++c) {
    int64_t bytes = 0;
    bool open = false;
    for (size_t index : chains_[c]) {
      in_chain[index] = true;
      if (!is_ready[index]) {
        open = false;
        continue;
      }
      if (!open || threshold <= 0 || bytes + entries_[index].bytes > threshold) {
        buckets.emplace_back();
        buckets.back().chain = static_cast<int>(c);
        open = true;
        bytes = 0;
      }
      buckets.back().members.push_back(index);
      bytes += entries_[index].bytes;
    }
  }
  int64_t bytes = 0;
  bool open = false;
  for (size_t index : ready) {
    if (in_chain[index]) continue;
    const Entry& entry = entries_[index];
    bool fits =
        open && threshold > 0 && bytes + entry.bytes <= threshold &&
        entries_[buckets.back().members.front()].param.scalar_type() == entry.param.scalar_type() &&
        entries_[buckets.back().members.front()].param.device() == entry.param.device();
    if (!fits) {
      buckets.emplace_back();
      open = true;
      bytes = 0;
    }
    buckets.back().members.push_back(index);
    bytes += entry.bytes;
  }
  return buckets;
}

// Double-buffered: bucket k+1 is started (copied in, if it must be) while bucket k is on the wire.
void GradientSync::Reduce(std::vector<Bucket>& buckets) {
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
    if (timeline.enabled()) timeline.End(entries_[index].name, "QUEUE");
  }
  const Entry& first = entries_[bucket.members.front()];
  // In place when this rank's gradients really are one contiguous range (the agreed layout may
  // not hold here, e.g. a .grad replaced since): then the collective reduces a view of them.
  bool view = fusion_buffer == nullptr && first.grad.is_contiguous();
  const char* end = nullptr;
  for (size_t index : bucket.members) {
    const torch::Tensor& grad = entries_[index].grad;
    view = view && grad.is_contiguous() &&
           grad.storage().unsafeGetStorageImpl() == first.grad.storage().unsafeGetStorageImpl() &&
           (end == nullptr || static_cast<const char*>(grad.data_ptr()) == end);
    end = static_cast<const char*>(grad.data_ptr()) + entries_[index].bytes;
  }
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
    timeline.Begin(bucket.track, "ALLREDUCE",
                   "\"bytes\":" + std::to_string(bytes) + ",\"dtype\":\"" + DtypeName(first.param) +
                       "\",\"tensors\":" + std::to_string(bucket.members.size()) +
                       ",\"in_place\":" + (view ? "true" : "false"));
  }
  torch::NoGradGuard no_grad;
  if (view) {
    bucket.flat = first.grad.detach().as_strided({numel}, {1}, first.grad.storage_offset());
    bytes_in_place_ += bytes;
  } else {
    TimelineSpan span(bucket.track, "MEMCPY_IN_FUSION_BUFFER");
    torch::Tensor spare;
    torch::Tensor& buffer = fusion_buffer ? *fusion_buffer : spare;
    if (!buffer.defined() || buffer.numel() < numel ||
        buffer.scalar_type() != first.param.scalar_type() ||
        buffer.device() != first.param.device()) {
      int64_t capacity = options_.fusion_threshold_bytes / first.param.element_size();
      buffer = torch::empty({std::max(numel, capacity)}, first.param.options());
    }
    bucket.flat = buffer.narrow(0, 0, numel);
    int64_t offset = 0;
    for (size_t index : bucket.members) {
      const Entry& entry = entries_[index];
      bucket.flat.narrow(0, offset, entry.param.numel()).view(entry.grad.sizes()).copy_(entry.grad);
      offset += entry.param.numel();
    }
    bytes_copied_ += bytes;
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
    TimelineSpan span(bucket.track, "MEMCPY_OUT_FUSION_BUFFER");
    int64_t offset = 0;
    for (size_t index : bucket.members) {
      Entry& entry = entries_[index];
      torch::Tensor slice =
          bucket.flat.narrow(0, offset, entry.param.numel()).view(entry.grad.sizes());
      if (!divide) {
        entry.grad.copy_(slice);
      } else if (entry.grad.is_contiguous()) {
        torch::Tensor out = entry.grad.view({-1});
        torch::div_out(out, slice.view({-1}), world);
      } else {
        entry.grad.copy_(slice.div(world));
      }
      offset += entry.param.numel();
    }
  }
  bucket.flat = torch::Tensor();
  if (timeline.enabled()) timeline.End(bucket.track, "ALLREDUCE");
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t index : bucket.members) entries_[index].state = State::kDone;
  ready_count_ -= bucket.members.size();
  done_.notify_all();
}

}  // namespace dtrain::clip
