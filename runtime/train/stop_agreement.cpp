#include "runtime/train/stop_agreement.h"

#include <signal.h>

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
    : coll_(collectives), lag_(collectives.collective_device().is_cuda() ? 2 : 0) {}

StopAgreement::~StopAgreement() = default;

int StopAgreement::AfterStep(int requested) {
  if (coll_.world_size() == 1) return requested;
  Timed timed(seconds_);
  torch::NoGradGuard no_grad;
  // Made where the sum runs, filled by a kernel: no copy from the host, no wait for the device.
  torch::Tensor counts = torch::zeros(
      {3}, torch::TensorOptions().dtype(torch::kLong).device(coll_.collective_device()));
  for (int i = 0; i < 3; ++i) {
    if (kOrder[i] == requested) counts.narrow(0, i, 1).fill_(1);
  }
  std::unique_ptr<StepScalars> slot;
  if (free_.empty()) {
    slot = std::make_unique<StepScalars>(coll_.collective_device());
  } else {
    slot = std::move(free_.front());
    free_.pop_front();
  }
  slot->Queue(coll_.QueueSumOverRanks(counts));
  in_flight_.push_back(std::move(slot));
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
  std::unique_ptr<StepScalars> slot = std::move(in_flight_.front());
  in_flight_.pop_front();
  const std::vector<double> sums = slot->Take();
  free_.push_back(std::move(slot));
  for (int i = 0; i < 3; ++i) {
    if (sums.at(i) > 0) return kOrder[i];
  }
  return 0;
}

}  // namespace dtrain::clip
