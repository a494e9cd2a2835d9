// Safetensors files (the format OpenCLIP and Hugging Face use for weights): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes.
// Torch-free: tensors are named byte ranges here; open_clip_weights turns them into tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtrain::clip {

// One tensor's entry in the header. `begin`/`end` are offsets into the data section.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// A file's header, checked: every range inside the file, sizes equal to shape x dtype size.
struct SafetensorsHeader {
  std::string path;
  uint64_t data_start = 0;                // file offset of the data section
  std::vector<SafetensorsEntry> entries;  // in file order
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a safetensors dtype; 0 when unknown.
int SafetensorsDtypeSize(const std::string& dtype);

// Reads and checks `path`'s header; throws std::runtime_error "<path>: <what>" on anything wrong.
SafetensorsHeader ReadSafetensorsHeader(const std::string& path);

// The bytes of `entry` (from a header of the same file).
std::string ReadSafetensorsBytes(const SafetensorsHeader& header, const SafetensorsEntry& entry);

// One tensor to write: its bytes must be shape x dtype size long.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Writes `tensors` (in this order) and `metadata` to `path` atomically (temp file, fsync, rename):
// one the disk did not take (fsync fails) does not replace the file there.
// Throws std::runtime_error naming the path.
void WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

}  // namespace dtrain::clip
