// Version parsing on real tool output: nvidia-smi, /proc/driver/nvidia/version (proprietary and
// open kernel modules), nvcc, version.json/.txt, nccl.h of several releases, NCCL library names
// and banners, torch's NCCL version, and the minimum-driver table.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "doctor/tool_versions.h"
#include "doctor/version.h"

namespace dtrain {
namespace {

std::string Text(const std::optional<Version>& v) {
  return v ? v->text : "<none>";
}

TEST(DoctorVersion, FindsDottedNumbersButNotWordGluedOnes) {
  EXPECT_EQ(Text(Version::Find("release 12.4, V12.4.131")), "12.4");
  EXPECT_EQ(Text(Version::Find("x86_64 Kernel Module  535.54.03")), "535.54.03");
  EXPECT_EQ(Text(Version::Find("cu121 torch 2.4.0")), "2.4.0");
  EXPECT_FALSE(Version::Find("no digits here"));
  EXPECT_EQ(Text(Version::Parse(" 3.11.2 ")), "3.11.2");
  EXPECT_FALSE(Version::Parse("3.11.2rc1"));
}

TEST(DoctorVersion, ComparesNumericallyAndMatchesPins) {
  auto v = [](const char* s) { return *Version::Parse(s); };
  EXPECT_LT(CompareVersions(v("470.82.01"), v("525.60.13")), 0);
  EXPECT_GT(CompareVersions(v("535.104.05"), v("535.54.03")), 0);
  EXPECT_EQ(CompareVersions(v("12.4"), v("12.4.0")), 0);
  EXPECT_TRUE(MatchesPin(v("2.21.5"), v("2.21")));
  EXPECT_FALSE(MatchesPin(v("2.2.5"), v("2.21")));
  EXPECT_FALSE(MatchesPin(v("12.4"), v("12.4.1")));
  EXPECT_EQ(v("12.4.131").MajorMinor(), "12.4");
}

TEST(DoctorVersion, NvidiaSmiQueryLines) {
  auto a100 = ParseNvidiaSmiGpuLine("NVIDIA A100-SXM4-80GB, 81920 MiB, 535.54.03");
  ASSERT_TRUE(a100);
  EXPECT_EQ(a100->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a100->memory_mib, 81920);
  EXPECT_EQ(a100->driver, "535.54.03");
  auto h100 = ParseNvidiaSmiGpuLine("NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15\r");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100->driver, "550.54.15");
  auto v100 = ParseNvidiaSmiGpuLine("Tesla V100-SXM2-16GB, 16160 MiB, 470.82.01");
  ASSERT_TRUE(v100);
  EXPECT_EQ(v100->memory_mib, 16160);
  // What nvidia-smi prints when the driver is gone is not a GPU.
  EXPECT_FALSE(ParseNvidiaSmiGpuLine(
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
      "that the latest NVIDIA driver is installed and running."));
}

TEST(DoctorVersion, ProcDriverVersionBothKernelModuleFlavours) {
  const char* proprietary =
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n"
      "GCC version:  gcc version 11.3.0 (Ubuntu 11.3.0-1ubuntu1~22.04.1)\n";
  const char* open =
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  "
      "(dvs-builder@U16-I3-B03-4-3)  Thu Feb 22 01:25:25 UTC 2024\n"
      "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
  const char* arm =
      "NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.104.05  Sat Aug 19 01:14:09 UTC 2023";
  auto p = ParseProcDriverVersion(proprietary);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->version.text, "535.54.03");
  EXPECT_FALSE(p->open_module);
  auto o = ParseProcDriverVersion(open);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->version.text, "550.54.14");
  EXPECT_TRUE(o->open_module);
  auto a = ParseProcDriverVersion(arm);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->version.text, "535.104.05");
  EXPECT_FALSE(ParseProcDriverVersion(""));
}

TEST(DoctorVersion, NvccOutputs) {
  const char* cuda124 =
      "nvcc: NVIDIA (R) Cuda compiler driver\n"
      "Copyright (c) 2005-2024 NVIDIA Corporation\n"
      "Built on Thu_Mar_28_02:18:24_PDT_2024\n"
      "Cuda compilation tools, release 12.4, V12.4.131\n"
      "Build cuda_12.4.r12.4/compiler.34097967_0\n";
  EXPECT_EQ(Text(CudaFromNvcc(cuda124)), "12.4.131");
  EXPECT_EQ(Text(CudaFromNvcc("Cuda compilation tools, release 11.8, V11.8.89")), "11.8.89");
  EXPECT_EQ(Text(CudaFromNvcc("Cuda compilation tools, release 13.0, V13.0.88")), "13.0.88");
  EXPECT_EQ(Text(CudaFromNvcc("Cuda compilation tools, release 10.2")), "10.2");
  EXPECT_FALSE(CudaFromNvcc("sh: 1: nvcc: not found"));
}

TEST(DoctorVersion, CudaVersionFiles) {
  const char* json =
      "{    \"cuda\" : {       \"name\" : \"CUDA SDK\",       \"version\" : \"12.4.1\"    },"
      "    \"cuda_cccl\" : {       \"name\" : \"CUDA C++ Core Compute Libraries\","
      "       \"version\" : \"12.4.127\"    } }";
  EXPECT_EQ(Text(CudaFromVersionJson(json)), "12.4.1");
  EXPECT_FALSE(CudaFromVersionJson("{\"cuda_cccl\": {\"version\": \"12.4.127\"}}"));
  EXPECT_FALSE(CudaFromVersionJson("not json"));
  EXPECT_EQ(Text(CudaFromVersionTxt("CUDA Version 10.2.89\n")), "10.2.89");
}

TEST(DoctorVersion, NcclVersionCodeBothSchemes) {
  EXPECT_EQ(Text(DecodeNcclVersionCode(2708)), "2.7.8");  // X*1000+Y*100+Z
  EXPECT_EQ(Text(DecodeNcclVersionCode(2804)), "2.8.4");
  EXPECT_EQ(Text(DecodeNcclVersionCode(20906)), "2.9.6");  // X*10000+Y*100+Z from 2.9
  EXPECT_EQ(Text(DecodeNcclVersionCode(21805)), "2.18.5");
  EXPECT_EQ(Text(DecodeNcclVersionCode(22809)), "2.28.9");
  EXPECT_FALSE(DecodeNcclVersionCode(0));
}

TEST(DoctorVersion, NcclHeadersOfSeveralReleases) {
  const char* nccl278 =
      "#ifndef NCCL_H_\n#define NCCL_H_\n\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n"
      "#define NCCL_MAJOR 2\n#define NCCL_MINOR 7\n#define NCCL_PATCH 8\n#define NCCL_SUFFIX "
      "\"\"\n\n"
      "#define NCCL_VERSION_CODE 2708\n#define NCCL_VERSION(X,Y,Z) ((X) * 1000 + (Y) * 100 + "
      "(Z))\n";
  const char* nccl2185 =
      "#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n#define NCCL_PATCH 5\n#define NCCL_SUFFIX "
      "\"\"\n\n"
      "#define NCCL_VERSION_CODE 21805\n#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? "
      "(X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))\n";
  // Only the code: decoded with the scheme its size implies.
  const char* code_only = "#define NCCL_VERSION_CODE 22105\n";
  EXPECT_EQ(Text(NcclFromHeader(nccl278)), "2.7.8");
  EXPECT_EQ(Text(NcclFromHeader(nccl2185)), "2.18.5");
  EXPECT_EQ(Text(NcclFromHeader(code_only)), "2.21.5");
  EXPECT_FALSE(NcclFromHeader("#define NCCL_H_\n"));
}

TEST(DoctorVersion, NcclHeaderOnThisMachine) {
  std::ifstream in("/usr/local/cuda/include/nccl.h");
  if (!in) GTEST_SKIP() << "no /usr/local/cuda/include/nccl.h here";
  std::stringstream ss;
  ss << in.rdbuf();
  auto v = NcclFromHeader(ss.str());
  ASSERT_TRUE(v);
  // NCCL_MAJOR/MINOR/PATCH and NCCL_VERSION_CODE of the real header must agree.
  std::string text = ss.str();
  size_t at = text.find("#define NCCL_VERSION_CODE ");
  ASSERT_NE(at, std::string::npos);
  long long code = std::stoll(text.substr(at + 26, 12));
  EXPECT_EQ(Text(DecodeNcclVersionCode(code)), v->text);
}

TEST(DoctorVersion, NcclLibraryNamesAndBanner) {
  EXPECT_EQ(Text(NcclFromLibraryName("/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.5")), "2.18.5");
  EXPECT_EQ(Text(NcclFromLibraryName("libnccl.so.2.21.5")), "2.21.5");
  EXPECT_FALSE(NcclFromLibraryName("/usr/local/cuda-13.0/lib/libnccl.so.2"));
  EXPECT_FALSE(NcclFromLibraryName("/usr/local/cuda/lib64/libcudart.so.12.4.127"));
  EXPECT_EQ(Text(NcclFromLibraryString("NCCL version 2.28.9+cuda13.0")), "2.28.9");
  EXPECT_EQ(Text(NcclFromLibraryString("NCCL version 2.18.5+cuda12.2")), "2.18.5");
  EXPECT_FALSE(NcclFromLibraryString(""));
}

TEST(DoctorVersion, TorchNcclVersionForms) {
  EXPECT_EQ(Text(NcclFromTorch("(2, 21, 5)")), "2.21.5");
  EXPECT_EQ(Text(NcclFromTorch("2708")), "2.7.8");  // older torch: the raw code
  EXPECT_EQ(Text(NcclFromTorch("21805")), "2.18.5");
  EXPECT_FALSE(NcclFromTorch("()"));
}

TEST(DoctorVersion, MinimumDriverPerCudaMajor) {
  EXPECT_EQ(Text(MinimumDriverForCuda(11)), "450.80.02");
  EXPECT_EQ(Text(MinimumDriverForCuda(12)), "525.60.13");
  EXPECT_EQ(Text(MinimumDriverForCuda(13)), "580");
  EXPECT_FALSE(MinimumDriverForCuda(9));
}

}  // namespace
}  // namespace dtrain
