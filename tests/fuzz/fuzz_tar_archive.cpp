// A WebDataset shard (tar): members or std::runtime_error naming the archive and offset.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "runtime/data/tar_archive.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dtrain::clip::TarReader reader(dtrain::fuzz::WriteInput("shard.tar", data, size));
    dtrain::clip::TarMember member;
    while (reader.Next(member)) {
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
