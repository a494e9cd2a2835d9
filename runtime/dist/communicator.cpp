#include "runtime/dist/communicator.h"

#include <chrono>
#include <stdexcept>
#include <vector>

#include "runtime/dist/c10d_compat.h"
#include "runtime/dist/heartbeat.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain::clip {
namespace {

// Work that already finished when it was started (a blocking fallback).
class DoneCollective : public PendingCollective {
 public:
  void Wait() override {}
};

// One collective as the heartbeat sees it: entered when started, left when its result is in.
// A wait that fails (the backend's timeout) says which ranks never entered it.
class WatchedCollective {
 public:
  WatchedCollective(const CommunicatorOptions& o, const char* name, int64_t bytes)
      : set_(o.set_name),
        seq_(GlobalHeartbeat().EnterCollective(o.set_name, o.members, name, bytes, "")) {}
  ~WatchedCollective() { GlobalHeartbeat().LeaveCollective(set_, seq_); }
  void Wait(c10d::Work& work) {
    try {
      const auto begun = std::chrono::steady_clock::now();
      work.wait();
      GlobalHeartbeat().Waited(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
    } catch (const std::exception& e) {
      const std::string stall = GlobalHeartbeat().DescribeStall(set_, seq_);
      if (stall.empty()) throw;
      throw std::runtime_error(stall + " (" + e.what() + ")");
    }
  }

 private:
  std::string set_;
  int64_t seq_;
};

int64_t Bytes(const torch::Tensor& t) {
  return static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
}

// c10d work started by a process group; watched by the heartbeat unless `watch` is null.
class C10dPendingCollective : public PendingCollective {
 public:
  C10dPendingCollective(c10::intrusive_ptr<c10d::Work> work,
                        std::unique_ptr<WatchedCollective> watch)
      : work_(std::move(work)), watch_(std::move(watch)) {}
  void Wait() override {
    if (!watch_) {
      work_->wait();
      return;
    }
    watch_->Wait(*work_);
    watch_.reset();
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::unique_ptr<WatchedCollective> watch_;
};

// A Communicator over one c10d group (ProcessGroupGloo or ProcessGroupNCCL).
// Every call waits for its work, so errors (timeouts, lost peers) surface at the call site.
class C10dCommunicator : public Communicator {
 public:
  C10dCommunicator(CommunicatorOptions options, c10::intrusive_ptr<compat::C10dGroup> group,
                   int rank, int size)
      : backend_(options.backend),
        options_(std::move(options)),
        group_(std::move(group)),
        rank_(rank),
        size_(size) {}

  const std::string& backend() const override { return backend_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* allreduce_activity() const override {
    return backend_ == "nccl" ? trace::kNcclAllreduce : trace::kGlooAllreduce;
  }

  void AllreduceSum(torch::Tensor& tensor) override { AllreduceSumAsync(tensor)->Wait(); }

  std::unique_ptr<PendingCollective> AllreduceSumAsync(torch::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    auto watch = std::make_unique<WatchedCollective>(options_, trace::kAllreduce, Bytes(tensor));
    return std::make_unique<C10dPendingCollective>(group_->allreduce(tensors, options),
                                                   std::move(watch));
  }

  std::unique_ptr<PendingCollective> AllreduceSumInBackground(torch::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return std::make_unique<C10dPendingCollective>(group_->allreduce(tensors, options), nullptr);
  }

  void ReduceSum(torch::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::ReduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.rootRank = root;
    WatchedCollective watch(options_, trace::kReduce, Bytes(tensor));
    watch.Wait(*group_->reduce(tensors, options));
  }

  void Broadcast(torch::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    WatchedCollective watch(options_, trace::kBroadcast, Bytes(tensor));
    watch.Wait(*group_->broadcast(tensors, options));
  }

  torch::Tensor Allgather(const torch::Tensor& tensor) override {
    torch::Tensor input = tensor.contiguous();
    std::vector<at::Tensor> inputs{input};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(torch::empty_like(input));
    WatchedCollective watch(options_, trace::kAllgather, Bytes(input) * size_);
    watch.Wait(*group_->allgather(outputs, inputs));
    return torch::cat(outputs[0], 0);
  }

  void Barrier() override {
    WatchedCollective watch(options_, trace::kBarrier, 0);
    watch.Wait(*group_->barrier());
  }

 private:
  std::string backend_;
  CommunicatorOptions options_;
  c10::intrusive_ptr<compat::C10dGroup> group_;
  int rank_, size_;
};

}  // namespace

std::unique_ptr<PendingCollective> Communicator::AllreduceSumAsync(torch::Tensor& tensor) {
  AllreduceSum(tensor);
  return std::make_unique<DoneCollective>();
}

std::unique_ptr<Communicator> MakeCommunicator(const CommunicatorOptions& options,
                                               const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int size) {
  c10::intrusive_ptr<compat::C10dGroup> group;
  if (options.backend == "gloo") {
    group = compat::MakeGlooGroup(store, rank, size, options.timeout, options.gloo_interface,
                                  options.gloo_bind_host);
  } else if (options.backend == "nccl") {
    group = compat::MakeNcclGroup(store, rank, size, options.timeout);
  } else {
    throw std::runtime_error("unknown --dist-backend '" + options.backend +
                             "' (expected gloo or nccl)");
  }
  return std::make_unique<C10dCommunicator>(options, std::move(group), rank, size);
}

std::string DefaultBackend() {
  return torch::cuda::is_available() ? "nccl" : "gloo";
}

}  // namespace dtrain::clip
