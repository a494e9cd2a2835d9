// Version extraction from real tool output; formats documented next to each parser.
#include "doctor/tool_versions.h"

#include <cctype>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "doctor/tool_output_text.h"

namespace dtrain {
namespace {

// The integer after "#define NAME" in a C header; nullopt if the macro is not defined so.
std::optional<long long> DefinedInteger(std::string_view header, std::string_view name) {
  size_t pos = 0;
  while ((pos = header.find("#define", pos)) != std::string_view::npos) {
    pos += 7;
    size_t p = pos;
    while (p < header.size() && (header[p] == ' ' || header[p] == '\t')) ++p;
    if (header.compare(p, name.size(), name) != 0) continue;
    p += name.size();
    if (p >= header.size() || (header[p] != ' ' && header[p] != '\t')) continue;
    while (p < header.size() && (header[p] == ' ' || header[p] == '\t')) ++p;
    char* end = nullptr;
    std::string digits(header.substr(p, 24));
    long long value = std::strtoll(digits.c_str(), &end, 10);
    if (end == digits.c_str()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<GpuInfo> ParseNvidiaSmiGpuLine(std::string_view line) {
  line = TrimSpace(line);
  // The name may in principle hold a comma, so split from the right.
  size_t last = line.rfind(',');
  if (last == std::string_view::npos) return std::nullopt;
  size_t middle = line.rfind(',', last - 1);
  if (middle == std::string_view::npos || middle == 0) return std::nullopt;
  GpuInfo gpu;
  gpu.name = std::string(TrimSpace(line.substr(0, middle)));
  std::string_view memory = TrimSpace(line.substr(middle + 1, last - middle - 1));
  std::string_view driver = TrimSpace(line.substr(last + 1));
  auto mem = Version::Find(memory);
  auto drv = Version::Parse(driver);
  if (gpu.name.empty() || !mem || !drv) return std::nullopt;
  gpu.memory_mib = mem->parts[0];
  if (memory.find("GiB") != std::string_view::npos) gpu.memory_mib *= 1024;
  gpu.driver = drv->text;
  return gpu;
}

std::optional<DriverInfo> ParseProcDriverVersion(std::string_view text) {
  // Proprietary: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 ..."
  // Open:        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release ..."
  size_t module = text.find("Kernel Module");
  if (module == std::string_view::npos) return std::nullopt;
  size_t eol = text.find('\n', module);
  std::string_view rest = text.substr(module, eol == std::string_view::npos ? eol : eol - module);
  auto version = Version::Find(rest);
  if (!version || version->parts.size() < 2) return std::nullopt;
  DriverInfo info;
  info.version = *version;
  info.open_module = text.substr(0, module).find("Open") != std::string_view::npos;
  return info;
}

std::optional<Version> CudaFromNvcc(std::string_view nvcc_output) {
  size_t release = nvcc_output.find("release ");
  if (release == std::string_view::npos) return std::nullopt;
  size_t eol = nvcc_output.find('\n', release);
  std::string_view line =
      nvcc_output.substr(release, eol == std::string_view::npos ? eol : eol - release);
  size_t v = line.find(", V");
  if (v != std::string_view::npos) {
    if (auto full = Version::Find(line.substr(v + 3)); full && full->parts.size() >= 2) {
      return full;
    }
  }
  return Version::Find(line.substr(8));
}

std::optional<Version> CudaFromVersionJson(std::string_view json) {
  auto doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("cuda")) return std::nullopt;
  const auto& cuda = doc["cuda"];
  if (!cuda.is_object() || !cuda.contains("version") || !cuda["version"].is_string()) {
    return std::nullopt;
  }
  return Version::Parse(cuda["version"].get<std::string>());
}

std::optional<Version> CudaFromVersionTxt(std::string_view text) {
  size_t at = text.find("CUDA Version");
  if (at == std::string_view::npos) return std::nullopt;
  return Version::Find(text.substr(at + 12));
}

std::optional<Version> DecodeNcclVersionCode(long long code) {
  if (code <= 0) return std::nullopt;
  // 2.8.4 -> 2804 (X*1000+Y*100+Z); 2.9.6 -> 20906 and 2.21.5 -> 22105 (X*10000+Y*100+Z).
  if (code < 10000) {
    return Version::FromParts({static_cast<int>(code / 1000), static_cast<int>(code / 100 % 10),
                               static_cast<int>(code % 100)});
  }
  return Version::FromParts({static_cast<int>(code / 10000), static_cast<int>(code / 100 % 100),
                             static_cast<int>(code % 100)});
}

std::optional<Version> NcclFromHeader(std::string_view header) {
  auto major = DefinedInteger(header, "NCCL_MAJOR");
  auto minor = DefinedInteger(header, "NCCL_MINOR");
  auto patch = DefinedInteger(header, "NCCL_PATCH");
  if (major && minor && patch) {
    return Version::FromParts(
        {static_cast<int>(*major), static_cast<int>(*minor), static_cast<int>(*patch)});
  }
  if (auto code = DefinedInteger(header, "NCCL_VERSION_CODE")) return DecodeNcclVersionCode(*code);
  return std::nullopt;
}

std::optional<Version> NcclFromLibraryName(std::string_view path) {
  size_t so = path.rfind(".so.");
  if (so == std::string_view::npos ||
      path.find("libnccl", path.rfind('/') + 1) == std::string_view::npos) {
    return std::nullopt;
  }
  auto version = Version::Parse(path.substr(so + 4));
  if (!version || version->parts.size() < 3) return std::nullopt;
  return version;
}

std::optional<Version> NcclFromLibraryString(std::string_view text) {
  size_t at = text.find("NCCL version ");
  if (at == std::string_view::npos) return std::nullopt;
  auto version = Version::Find(text.substr(at + 13, 32));
  if (!version || version->parts.size() < 2) return std::nullopt;
  return version;
}

std::optional<Version> NcclFromTorch(std::string_view text) {
  text = TrimSpace(text);
  if (!text.empty() && text.front() == '(') {
    std::vector<int> parts;
    std::string_view rest = text.substr(1);
    while (auto part = Version::Find(rest)) {
      parts.push_back(part->parts[0]);
      size_t at = rest.find(part->text);
      rest.remove_prefix(at + part->text.size());
    }
    if (parts.size() < 2) return std::nullopt;
    return Version::FromParts(parts);
  }
  auto version = Version::Parse(text);
  if (!version) return std::nullopt;
  if (version->parts.size() == 1) return DecodeNcclVersionCode(version->parts[0]);
  return version;
}

std::optional<Version> MinimumDriverForCuda(int cuda_major) {
  switch (cuda_major) {
    case 11:
      return Version::Parse("450.80.02");
    case 12:
      return Version::Parse("525.60.13");
    case 13:
      return Version::Parse("580");
    default:
      return std::nullopt;
  }
}

}  // namespace dtrain
