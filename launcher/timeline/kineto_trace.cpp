// Kineto's header and HTA's kernel categories (hta/utils/utils.py, HolisticTraceAnalysis 0.5.0).
#include "launcher/timeline/kineto_trace.h"

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

int IntMember(const std::string& path, const nlohmann::json& object, const char* key,
              const char* where) {
  auto it = object.find(key);
  if (it == object.end()) return -1;
  if (!it->is_number_integer()) {
    throw Error(fmt::format("{}: {}.{} is not an integer ({})", path, where, key, it->dump()));
  }
  return it->get<int>();
}

}  // namespace

bool IsKinetoHeader(const nlohmann::json& header) {
  return header.contains("schemaVersion") || header.contains("baseTimeNanoseconds") ||
         header.contains("distributedInfo");
}

KinetoTraceInfo ReadKinetoHeader(const std::string& path, const nlohmann::json& header) {
  KinetoTraceInfo info;
  info.schema_version = IntMember(path, header, "schemaVersion", "trace");
  if (info.schema_version != kKinetoSchemaVersion) {
    throw Error(fmt::format(
        "{}: PyTorch profiler trace of schema version {}; dtrain timeline reads version {} "
        "(traces from torch 1.8 to 2.x)",
        path, info.schema_version < 0 ? std::string("(none)") : std::to_string(info.schema_version),
        kKinetoSchemaVersion));
  }
  if (auto base = header.find("baseTimeNanoseconds"); base != header.end()) {
    if (!base->is_number_integer()) {
      throw Error(fmt::format("{}: baseTimeNanoseconds is not an integer", path));
    }
    info.base_time_ns = base->get<int64_t>();
  }
  if (auto dist = header.find("distributedInfo"); dist != header.end()) {
    if (!dist->is_object()) throw Error(fmt::format("{}: distributedInfo is not an object", path));
    info.rank = IntMember(path, *dist, "rank", "distributedInfo");
    info.world_size = IntMember(path, *dist, "world_size", "distributedInfo");
    if (info.rank >= 0 && info.world_size > 0 && info.rank >= info.world_size) {
      throw Error(fmt::format("{}: distributedInfo says rank {} of world size {}", path, info.rank,
                              info.world_size));
    }
    if (auto backend = dist->find("backend"); backend != dist->end() && backend->is_string()) {
      info.backend = backend->get<std::string>();
    }
  }
  return info;
}

GpuActivityKind ClassifyGpuActivity(std::string_view name) {
  // HTA: is_comm_kernel ^nccl.*Kernel; is_memory_kernel (^Memcpy)|(^Memset)|(^dma);
  // is_compute_kernel: not (^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync).
  if (StartsWith(name, "nccl") && Contains(name.substr(4), "Kernel")) {
    return GpuActivityKind::kCommunication;
  }
  if (StartsWith(name, "Memcpy") || StartsWith(name, "Memset") || StartsWith(name, "dma")) {
    return GpuActivityKind::kMemory;
  }
  if (Contains(name, "Memcpy") || Contains(name, "Sync")) return GpuActivityKind::kOther;
  return GpuActivityKind::kCompute;
}

bool IsGpuActivityCategory(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}

LaunchCallKind ClassifyLaunchCall(std::string_view name) {
  // HTA: hta/analyzers/cuda_kernel_analysis.py, cuda_kernel_launch_stats.
  for (std::string_view runtime :
       {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}) {
    if (name == runtime) return LaunchCallKind::kRuntime;
  }
  if (name == "cuLaunchKernel" || name == "cuLaunchKernelEx") return LaunchCallKind::kDriver;
  return LaunchCallKind::kNone;
}

bool IsCollectiveAnnotation(std::string_view cat, std::string_view name) {
  if (cat != "user_annotation") return false;
  for (std::string_view backend : {"nccl:", "gloo:", "mpi:", "ucc:", "xccl:"}) {
    if (StartsWith(name, backend)) return true;
  }
  return false;
}

bool IsStepAnnotation(std::string_view step_name, std::string_view name) {
  return step_name.empty() ? name.rfind("ProfilerStep#", 0) == 0 : name == step_name;
}

}  // namespace dtrain
