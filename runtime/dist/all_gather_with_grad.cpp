#include "runtime/dist/all_gather_with_grad.h"

#include <cstdint>

#include "runtime/formats/json_object.h"
#include "runtime/trace/timeline.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain::clip {
namespace {

std::string GatherArgs(const torch::Tensor& t) {
  return JsonObject()
      .Add(trace::kArgBytes, static_cast<int64_t>(t.numel() * t.element_size()))
      .Add(trace::kArgDtype, c10::toString(t.scalar_type()))
      .Body();
}

// The autograd node. The communicator travels as an integer in saved_data (IValues hold no
// arbitrary pointers); AllGatherWithGrad's contract keeps it alive through backward.
struct AllGatherFunction : public torch::autograd::Function<AllGatherFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor local,
                               int64_t comm_address) {
    auto* comm = reinterpret_cast<Communicator*>(comm_address);
    ctx->saved_data["comm"] = comm_address;
    ctx->saved_data["rows"] = local.size(0);
    TimelineSpan span(trace::kAllgatherTrack, trace::kAllgather, GatherArgs(local));
    return comm->Allgather(local);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* comm = reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    int64_t rows = ctx->saved_data["rows"].toInt();
    torch::Tensor summed = grads[0].contiguous().clone();
    {
      TimelineSpan span(trace::kAllgatherTrack, comm->allreduce_activity(), GatherArgs(summed));
      comm->AllreduceSum(summed);
    }
    return {summed.narrow(0, comm->rank() * rows, rows), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor AllGatherWithGrad(const torch::Tensor& local, Communicator& comm) {
  if (comm.size() == 1) return local;
  return AllGatherFunction::apply(local, reinterpret_cast<int64_t>(&comm));
}

torch::Tensor AllGatherNoGrad(const torch::Tensor& local, Communicator& comm) {
  if (comm.size() == 1) return local;
  torch::Tensor gathered;
  {
    torch::NoGradGuard no_grad;
    TimelineSpan span(trace::kAllgatherTrack, trace::kAllgather, GatherArgs(local));
    gathered = comm.Allgather(local.detach());
  }
  std::vector<torch::Tensor> parts = gathered.chunk(comm.size(), 0);
  parts[comm.rank()] = local;
  return torch::cat(parts, 0);
}

}  // namespace dtrain::clip
