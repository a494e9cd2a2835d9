#include "runtime/train/step_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

namespace dtrain::clip {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> Activities(const torch::Device& device) {
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  return activities;
}

ProfilerConfig Config() {
  return ProfilerConfig(ProfilerState::KINETO);
}

}  // namespace

StepProfile::StepProfile(int64_t first, int64_t last, std::string path, const torch::Device& device)
    : first_(first), last_(last), path_(std::move(path)), device_(device) {}

StepProfile::~StepProfile() {
  if (running_) profiler::disableProfiler();
}

void StepProfile::BeforeStep(int64_t step) {
  if (first_ == 0 || running_ || step != first_) return;
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  profiler::prepareProfiler(Config(), Activities(device_));
  profiler::enableProfiler(Config(), Activities(device_));
  running_ = true;
}

void StepProfile::AfterStep(int64_t step) {
  if (running_ && step >= last_) Finish();
}

void StepProfile::Finish() {
  if (!running_) return;
  // The kernels of the last step are still queued: they are in the trace only once they ran.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  running_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  result->save(path_);
  std::printf("profile: steps %lld-%lld in %s\n", static_cast<long long>(first_),
              static_cast<long long>(last_), path_.c_str());
  std::fflush(stdout);
}

}  // namespace dtrain::clip
