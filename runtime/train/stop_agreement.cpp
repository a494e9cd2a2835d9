#include "runtime/train/stop_agreement.h"

#include <signal.h>

#include <chrono>
#include <vector>

namespace dtrain::clip {
namespace {

// A count per signal, in the order that wins when ranks got different ones.
constexpr int kOrder[3] = {SIGTERM, SIGINT, SIGUSR1};

// Adds the time from its making to its end to `total`.
class Timed {
 public:
  explicit Timed(double& total) : total_(total) {}
  ~Timed() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

StopAgreement::StopAgreement(TrainCollectives& collectives)
    : coll_(collectives),
      on_gpu_(collectives.collective_device().is_cuda()),
      lag_(on_gpu_ ? 2 : 1) {}

StopAgreement::~StopAgreement() = default;

int StopAgreement::AfterStep(int requested) {
  if (coll_.world_size() == 1) return requested;
  Timed timed(seconds_);
  torch::NoGradGuard no_grad;
  Exchange exchange;
  // Made where the sum runs, filled by a kernel: no copy from the host, no wait for the device.
  exchange.counts = torch::zeros(
      {3}, torch::TensorOptions().dtype(torch::kLong).device(coll_.collective_device()));
  for (int i = 0; i < 3; ++i) {
    if (kOrder[i] == requested) exchange.counts.narrow(0, i, 1).fill_(1);
  }
  exchange.pending = coll_.StartSumOverRanks(exchange.counts);
  if (on_gpu_) {
    exchange.pending->Wait();  // the stream waits for the sum, not the host
    if (copies_.empty()) {
      exchange.copy = std::make_unique<StepScalars>(coll_.collective_device());
    } else {
      exchange.copy = std::move(copies_.front());
      copies_.pop_front();
    }
    exchange.copy->Queue(exchange.counts);
  }
  in_flight_.push_back(std::move(exchange));
  if (static_cast<int>(in_flight_.size()) <= lag_) return 0;
  return Read();
}

int StopAgreement::Drain() {
  Timed timed(seconds_);
  int agreed = 0;
  while (!in_flight_.empty()) {
    const int signal = Read();
    if (agreed == 0) agreed = signal;
  }
  return agreed;
}

int StopAgreement::Read() {
  Exchange exchange = std::move(in_flight_.front());
  in_flight_.pop_front();
  std::vector<double> sums;
  if (exchange.copy) {
    sums = exchange.copy->Take();
    copies_.push_back(std::move(exchange.copy));
  } else {
    exchange.pending->Wait();
    const int64_t* counts = exchange.counts.data_ptr<int64_t>();
    sums.assign(counts, counts + exchange.counts.numel());
  }
  for (int i = 0; i < 3; ++i) {
    if (sums.at(i) > 0) return kOrder[i];
  }
  return 0;
}

}  // namespace dtrain::clip
