// `-H host:slots,...`, hostfiles and Slurm host lists: a NodeSpec list or a dtrain::Error.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "launcher/error.h"
#include "launcher/host_list.h"
#include "launcher/slurm/slurm_hostlist.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dtrain::ParseHostList(text);
  } catch (const dtrain::Error&) {
  }
  try {
    dtrain::ParseHostfile(dtrain::fuzz::WriteInput("hostfile", data, size));
  } catch (const dtrain::Error&) {
  }
  try {
    if (size < 4096) dtrain::ExpandHostlist(text);
  } catch (const dtrain::Error&) {
  }
  return 0;
}
