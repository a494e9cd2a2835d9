// An OpenCLIP model-config JSON file through the runtime's own JSON reader.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "runtime/formats/json_reader.h"
#include "runtime/config/model_config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dtrain::clip::ParseJson(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const std::runtime_error&) {
  }
  try {
    dtrain::clip::LoadModelConfig(dtrain::fuzz::WriteInput("model.json", data, size));
  } catch (const std::runtime_error&) {
  }
  return 0;
}
