#include "runtime/train/cuda_event_clock.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/trace/timeline.h"

#ifdef DTRAIN_HAVE_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace dtrain::clip {

#ifdef DTRAIN_HAVE_CUDA
namespace {

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("GPU-timed spans: ") + what + ": " +
                             cudaGetErrorString(status));
  }
}

class CudaEventClock : public DeviceEventClock {
 public:
  explicit CudaEventClock(c10::DeviceIndex device) : device_(device) {}
  ~CudaEventClock() override {
    c10::cuda::CUDAGuard guard(device_);
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }

  int Record() override {
    c10::cuda::CUDAGuard guard(device_);
    int id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      cudaEvent_t event;
      Check(cudaEventCreate(&event), "cudaEventCreate");  // timing enabled: the default flags
      events_.push_back(event);
      id = static_cast<int>(events_.size()) - 1;
    }
    Check(cudaEventRecord(events_[id], c10::cuda::getCurrentCUDAStream(device_).stream()),
          "cudaEventRecord");
    return id;
  }
  bool Done(int event) override {
    cudaError_t status = cudaEventQuery(events_.at(event));
    if (status == cudaErrorNotReady) return false;
    Check(status, "cudaEventQuery");
    return true;
  }
  void Wait(int event) override {
    Check(cudaEventSynchronize(events_.at(event)), "cudaEventSynchronize");
  }
  double ElapsedUs(int from, int to) override {
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, events_.at(from), events_.at(to)), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1000.0;
  }
  void Release(int event) override { free_.push_back(event); }
  int64_t HostNowUs() override { return GlobalTimeline().NowMicros(); }

 private:
  c10::DeviceIndex device_;
  std::vector<cudaEvent_t> events_;
  std::vector<int> free_;
};

}  // namespace
#endif

std::unique_ptr<DeviceEventClock> MakeCudaEventClock(const torch::Device& device) {
#ifdef DTRAIN_HAVE_CUDA
  if (device.is_cuda()) return std::make_unique<CudaEventClock>(device.index());
#endif
  (void)device;
  return nullptr;
}

}  // namespace dtrain::clip
