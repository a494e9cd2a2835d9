// A .safetensors file's header (8-byte length + JSON) and the tensor bytes it points at.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "runtime/formats/safetensors_file.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dtrain::clip::SafetensorsHeader header = dtrain::clip::ReadSafetensorsHeader(
        dtrain::fuzz::WriteInput("weights.safetensors", data, size));
    for (const auto& entry : header.entries) dtrain::clip::ReadSafetensorsBytes(header, entry);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
