// Reads versions out of what the tools on a node print: nvidia-smi, /proc/driver/nvidia/version,
// nvcc, CUDA's version.json/version.txt, nccl.h, the NCCL library, torch. Each returns nullopt
// (or an empty result) when the text does not hold what it looks for; none throws.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/version.h"

namespace dtrain {

// One line of `nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader`.
struct GpuInfo {
  std::string name;  // "NVIDIA A100-SXM4-80GB"
  long long memory_mib = 0;
  std::string driver;  // "535.54.03"
};
std::optional<GpuInfo> ParseNvidiaSmiGpuLine(std::string_view line);

// The kernel module that /proc/driver/nvidia/version describes.
struct DriverInfo {
  Version version;
  bool open_module = false;  // "NVIDIA UNIX Open Kernel Module" rather than the proprietary one
};
std::optional<DriverInfo> ParseProcDriverVersion(std::string_view text);

// "Cuda compilation tools, release 12.4, V12.4.131" -> 12.4.131 (12.4 without the V part).
std::optional<Version> CudaFromNvcc(std::string_view nvcc_output);
// version.json of CUDA >= 11.1: {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}.
std::optional<Version> CudaFromVersionJson(std::string_view json);
// version.txt of older toolkits: "CUDA Version 10.2.89".
std::optional<Version> CudaFromVersionTxt(std::string_view text);

// NCCL_VERSION_CODE: X*1000+Y*100+Z before 2.9, X*10000+Y*100+Z from 2.9 on.
std::optional<Version> DecodeNcclVersionCode(long long code);
// nccl.h: NCCL_MAJOR/NCCL_MINOR/NCCL_PATCH, else NCCL_VERSION_CODE.
std::optional<Version> NcclFromHeader(std::string_view header);
// "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5" -> 2.21.5; nullopt for "libnccl.so.2".
std::optional<Version> NcclFromLibraryName(std::string_view path);
// The banner compiled into the library: "NCCL version 2.28.9+cuda13.0" -> 2.28.9.
std::optional<Version> NcclFromLibraryString(std::string_view text);
// torch.cuda.nccl.version(): "(2, 21, 5)" in torch >= 1.13... or the code "2708"/"21805" before.
std::optional<Version> NcclFromTorch(std::string_view text);

// Oldest Linux driver that runs CUDA `cuda_major` (11 -> 450.80.02, 12 -> 525.60.13, 13 -> 580);
// nullopt for majors the table does not know.
std::optional<Version> MinimumDriverForCuda(int cuda_major);

}  // namespace dtrain
