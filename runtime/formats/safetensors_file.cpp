#include "runtime/formats/safetensors_file.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "runtime/formats/file_sync.h"
#include "runtime/formats/json_reader.h"
#include "runtime/formats/json_text.h"

namespace dtrain::clip {
namespace {

// A header larger than this is not a weights file (the format's own limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

uint64_t FileSize(std::ifstream& in) {
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  return size;
}

uint64_t NonNegativeInteger(const JsonValue& v, const std::string& path, const std::string& what) {
  if (!v.is_number() || v.number < 0 || v.number != std::floor(v.number) || v.number > 9.0e15) {
    Fail(path, what + " is not a non-negative integer");
  }
  return static_cast<uint64_t>(v.number);
}

SafetensorsEntry ParseEntry(const std::string& name, const JsonValue& v, const std::string& path) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) Fail(path, where + " is not an object");
  SafetensorsEntry e;
  e.name = name;
  auto dtype = v.object.find("dtype");
  auto shape = v.object.find("shape");
  auto offsets = v.object.find("data_offsets");
  if (dtype == v.object.end() || !dtype->second.is_string()) Fail(path, where + " has no dtype");
  if (shape == v.object.end() || shape->second.kind != JsonValue::Kind::kArray) {
    Fail(path, where + " has no shape");
  }
  if (offsets == v.object.end() || offsets->second.kind != JsonValue::Kind::kArray ||
      offsets->second.array.size() != 2) {
    Fail(path, where + " has no data_offsets [begin, end]");
  }
  e.dtype = dtype->second.string;
  const int size = SafetensorsDtypeSize(e.dtype);
  if (size == 0) Fail(path, where + " has unsupported dtype " + e.dtype);
  uint64_t elements = 1;
  for (const auto& d : shape->second.array) {
    const uint64_t n = NonNegativeInteger(d, path, where + "'s shape");
    if (n != 0 && elements > (uint64_t{1} << 50) / n) Fail(path, where + "'s shape is too large");
    elements *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  e.begin = NonNegativeInteger(offsets->second.array[0], path, where + "'s data_offsets");
  e.end = NonNegativeInteger(offsets->second.array[1], path, where + "'s data_offsets");
  if (e.end < e.begin || e.end - e.begin != elements * static_cast<uint64_t>(size)) {
    Fail(path, where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] do not hold " + std::to_string(elements) + " " + e.dtype + " elements");
  }
  return e;
}

}  // namespace

int SafetensorsDtypeSize(const std::string& dtype) {
  static const std::map<std::string, int> sizes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                   {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
                                                   {"U8", 1},  {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsHeader ReadSafetensorsHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, std::string("cannot open: ") + std::strerror(errno));
  const uint64_t file_size = FileSize(in);
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    Fail(path, "too short for a safetensors file");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    Fail(path, "not a safetensors file (header length " + std::to_string(header_len) +
                   " for a file of " + std::to_string(file_size) + " bytes)");
  }
  std::string text(header_len, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_len)))
    Fail(path, "truncated header");
  const JsonValue root = ParseJson(text, path);
  if (!root.is_object()) Fail(path, "the header is not a JSON object");

  SafetensorsHeader header;
  header.path = path;
  header.data_start = 8 + header_len;
  const uint64_t data_size = file_size - header.data_start;
  for (const auto& [name, value] : root.object) {
    if (name == "__metadata__") {
      if (!value.is_object()) Fail(path, "__metadata__ is not an object");
      for (const auto& [key, v] : value.object) {
        if (!v.is_string()) Fail(path, "__metadata__." + key + " is not a string");
        header.metadata[key] = v.string;
      }
      continue;
    }
    SafetensorsEntry e = ParseEntry(name, value, path);
    if (e.end > data_size) {
      Fail(path, "tensor '" + name + "' ends at byte " + std::to_string(e.end) +
                     " but the data section has " + std::to_string(data_size) +
                     " (truncated file?)");
    }
    header.entries.push_back(std::move(e));
  }
  return header;
}

std::string ReadSafetensorsBytes(const SafetensorsHeader& header, const SafetensorsEntry& entry) {
  std::ifstream in(header.path, std::ios::binary);
  std::string bytes(entry.end - entry.begin, '\0');
  in.seekg(static_cast<std::streamoff>(header.data_start + entry.begin));
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    Fail(header.path, "cannot read tensor '" + entry.name + "'");
  }
  return bytes;
}

void WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) json += ',';
      first = false;
      AppendJsonString(json, key);
      json += ':';
      AppendJsonString(json, value);
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    if (t.bytes.size() != elements * static_cast<uint64_t>(SafetensorsDtypeSize(t.dtype))) {
      Fail(path, "tensor '" + t.name + "': " + std::to_string(t.bytes.size()) +
                     " bytes do not match its shape and dtype " + t.dtype);
    }
    if (json.size() > 1) json += ',';
    AppendJsonString(json, t.name);
    json += ":{\"dtype\":";
    AppendJsonString(json, t.dtype);
    json += ",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      json += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  json += '}';
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  while ((json.size() + 8) % 8 != 0) json += ' ';

  const std::string temp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) Fail(temp, std::string("cannot create: ") + std::strerror(errno));
    unsigned char len_bytes[8];
    uint64_t len = json.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    for (const auto& t : tensors)
      out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      Fail(temp, "cannot write (disk full?)");
    }
  }
  // An export the disk did not take must not replace the last one it did.
  const std::string unsynced = SyncToDisk(temp);
  if (!unsynced.empty()) {
    std::remove(temp.c_str());
    Fail(temp, "cannot write: the disk did not take it (fsync: " + unsynced + ")");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    Fail(path, "cannot move into place: " + why);
  }
  const std::string unnamed = SyncToDisk(FolderOf(path));
  if (!unnamed.empty()) {
    Fail(path, "written, but its folder could not be synced (fsync: " + unnamed +
                   "): the disk may not keep it");
  }
}

}  // namespace dtrain::clip
