#include "runtime/communicator.h"

#include <stdexcept>
#include <vector>

#include "runtime/c10d_compat.h"

namespace dtrain::clip {
namespace {

// Work that already finished when it was started (a blocking fallback).
class DoneCollective : public PendingCollective {
 public:
  void Wait() override {}
};

// c10d work started by a process group.
class C10dPendingCollective : public PendingCollective {
 public:
  explicit C10dPendingCollective(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  void Wait() override { work_->wait(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

// A Communicator over one c10d group (ProcessGroupGloo or ProcessGroupNCCL).
// Every call waits for its work, so errors (timeouts, lost peers) surface at the call site.
class C10dCommunicator : public Communicator {
 public:
  C10dCommunicator(std::string backend, c10::intrusive_ptr<compat::C10dGroup> group, int rank,
                   int size)
      : backend_(std::move(backend)), group_(std::move(group)), rank_(rank), size_(size) {}

  const std::string& backend() const override { return backend_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* allreduce_activity() const override {
    return backend_ == "nccl" ? "NCCL_ALLREDUCE" : "GLOO_ALLREDUCE";
  }

  void AllreduceSum(torch::Tensor& tensor) override { AllreduceSumAsync(tensor)->Wait(); }

  std::unique_ptr<PendingCollective> AllreduceSumAsync(torch::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return std::make_unique<C10dPendingCollective>(group_->allreduce(tensors, options));
  }

  void ReduceSum(torch::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::ReduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.rootRank = root;
    group_->reduce(tensors, options)->wait();
  }

  void Broadcast(torch::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_->broadcast(tensors, options)->wait();
  }

  torch::Tensor Allgather(const torch::Tensor& tensor) override {
    torch::Tensor input = tensor.contiguous();
    std::vector<at::Tensor> inputs{input};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(torch::empty_like(input));
    group_->allgather(outputs, inputs)->wait();
    return torch::cat(outputs[0], 0);
  }

  void Barrier() override { group_->barrier()->wait(); }

 private:
  std::string backend_;
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
  return std::make_unique<C10dCommunicator>(options.backend, std::move(group), rank, size);
}

std::string DefaultBackend() {
  return torch::cuda::is_available() ? "nccl" : "gloo";
}

}  // namespace dtrain::clip
