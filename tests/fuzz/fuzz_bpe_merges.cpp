// A BPE merges file (as OpenCLIP ships it, gzip or plain) and an encode/decode with it.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "runtime/text/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dtrain::clip::BpeTokenizer tokenizer(dtrain::fuzz::WriteInput("merges.txt", data, size), 16);
    tokenizer.Decode(tokenizer.Encode("a photo of a café &amp; a cat's hat, 2024!"));
  } catch (const std::runtime_error&) {
  }
  return 0;
}
