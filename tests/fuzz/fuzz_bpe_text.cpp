// Caption text before BPE: HTML unescaping, cleaning and the pre-tokenizer's regex stand-in, on
// any bytes a CSV or WebDataset caption may hold.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "runtime/text/bpe_tokenizer.h"
#include "runtime/text/html_entities.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dtrain::clip::UnescapeHtml(text);
    dtrain::clip::BpeTokenizer::PreTokenize(dtrain::clip::BpeTokenizer::CleanText(text));
  } catch (const std::runtime_error&) {
  }
  return 0;
}
