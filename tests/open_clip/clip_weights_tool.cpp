// Test helper for the OpenCLIP weight interchange (open_clip_interchange.py drives it):
//   export   --model M|--model-config F --seed S --inputs IN --weights OUT.safetensors --features OUT
//            a freshly initialised dtrain-clip model: its weights in OpenCLIP's layout and its
//            features on the inputs, computed by the model in memory
//   features --model M|--model-config F --weights W --inputs IN --features OUT [--bpe-vocab V]
//            the model loaded from OpenCLIP weights (LoadOpenClipWeights): its features; with
//            --bpe-vocab also the tokens dtrain's BPE tokenizer gives for IN's __metadata__ texts
// IN holds "images" [B, C, H, W] float32 and "tokens" [B, L] int64.
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "runtime/text/bpe_tokenizer.h"
#include "runtime/model/clip_model.h"
#include "runtime/config/model_config.h"
#include "runtime/model/open_clip_weights.h"
#include "runtime/formats/safetensors_file.h"

namespace {

using namespace dtrain::clip;

torch::Tensor Read(const SafetensorsHeader& h, const std::string& name) {
  for (const auto& e : h.entries) {
    if (e.name != name) continue;
    const auto type = e.dtype == "I64" ? torch::kInt64 : torch::kFloat32;
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(type));
    const std::string bytes = ReadSafetensorsBytes(h, e);
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    return t;
  }
  throw std::runtime_error(h.path + ": no tensor " + name);
}

SafetensorsTensor Entry(const std::string& name, torch::Tensor t) {
  t = t.contiguous();
  SafetensorsTensor s;
  s.name = name;
  s.dtype = t.scalar_type() == torch::kInt64 ? "I64" : "F32";
  s.shape = t.sizes().vec();
  s.bytes.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::map<std::string, std::string> flags;
  for (int i = 2; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  const std::string command = argv[1];
  try {
    ModelConfig config = flags.count("--model-config") ? LoadModelConfig(flags["--model-config"])
                                                       : PresetModelConfig(flags["--model"]);
    if (flags.count("--seed")) torch::manual_seed(std::stoll(flags["--seed"]));
    ClipModel model(config);
    if (command == "features") LoadOpenClipWeights(model, flags["--weights"]);
    model->eval();
    torch::NoGradGuard no_grad;
    const SafetensorsHeader in = ReadSafetensorsHeader(flags["--inputs"]);
    std::vector<SafetensorsTensor> out;
    out.push_back(Entry("image_features", model->EncodeImage(Read(in, "images"))));
    out.push_back(Entry("text_features", model->EncodeText(Read(in, "tokens"))));
    if (flags.count("--bpe-vocab")) {
      BpeTokenizer bpe(flags["--bpe-vocab"], config.text.context_length);
      std::vector<std::string> texts;
      for (int i = 0; in.metadata.count("text" + std::to_string(i)); ++i) {
        texts.push_back(in.metadata.at("text" + std::to_string(i)));
      }
      std::vector<int64_t> ids = bpe.Tokenize(texts);
      out.push_back(Entry("bpe_tokens", torch::tensor(ids).view(
                                            {static_cast<int64_t>(texts.size()), -1})));
    }
    if (command == "export") ExportOpenClipWeights(model, flags["--weights"]);
    WriteSafetensors(flags["--features"], out, {});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clip_weights_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
