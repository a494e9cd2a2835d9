#include "runtime/config/model_config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "runtime/formats/json_reader.h"

namespace dtrain::clip {
namespace {

// Keys that select architectures this trainer does not build: an error when set to anything
// but null/false/0, so a config is never trained as a different model than it describes.
const std::set<std::string> kUnsupportedKeys = {
    "timm_model_name",     "hf_model_name", "hf_tokenizer_name", "ls_init_value",
    "attentional_pool",    "quick_gelu",    "output_tokens",     "attn_pooler_heads",
    "final_ln_after_pool", "no_ln_pre",     "pool_type"};

bool IsUnset(const JsonValue& v) {
  return v.kind == JsonValue::Kind::kNull || (v.kind == JsonValue::Kind::kBool && !v.boolean) ||
         (v.kind == JsonValue::Kind::kNumber && v.number == 0);
}

std::string Where(const std::string& path, const JsonValue& v) {
  return path + ":" + std::to_string(v.line) + ":" + std::to_string(v.column);
}

void RejectUnsupported(const std::string& path, const JsonValue& object) {
  for (const auto& [key, value] : object.object) {
    if (!kUnsupportedKeys.count(key) || IsUnset(value)) continue;
    // OpenCLIP's defaults for these are harmless.
    if (key == "pool_type" && value.is_string() &&
        (value.string == "tok" || value.string == "argmax")) {
      continue;
    }
    throw std::runtime_error(Where(path, value) + ": \"" + key +
                             "\" selects a model variant dtrain-clip does not build; remove it "
                             "or use a plain ViT/transformer config");
  }
}

// The largest size a model-config key may give: above every model OpenCLIP lists (widths in the
// thousands, vocabularies in the hundreds of thousands), and far below what would overflow an int
// or make a tensor too large to allocate.
constexpr int kLargestSize = 1 << 22;

int ReadInt(const std::string& path, const JsonValue& object, const char* key, int fallback) {
  auto it = object.object.find(key);
  if (it == object.object.end() || it->second.kind == JsonValue::Kind::kNull) return fallback;
  const JsonValue* v = &it->second;
  // OpenCLIP allows image_size as [h, w]; only square images are built here.
  if (v->kind == JsonValue::Kind::kArray && v->array.size() == 2 && v->array[0].is_number() &&
      v->array[0].number == v->array[1].number) {
    v = &v->array[0];
  }
  // Compared as doubles before any conversion: a double outside int's range has no int.
  if (!v->is_number() || !(v->number >= 1 && v->number <= kLargestSize) ||
      v->number != std::floor(v->number)) {
    throw std::runtime_error(Where(path, *v) + ": \"" + key +
                             "\" must be a positive integer (at most " +
                             std::to_string(kLargestSize) + ")");
  }
  return static_cast<int>(v->number);
}

double ReadDouble(const std::string& path, const JsonValue& object, const char* key,
                  double fallback) {
  auto it = object.object.find(key);
  if (it == object.object.end() || it->second.kind == JsonValue::Kind::kNull) return fallback;
  if (!it->second.is_number() || it->second.number <= 0) {
    throw std::runtime_error(Where(path, it->second) + ": \"" + key + "\" must be a number > 0");
  }
  return it->second.number;
}

const JsonValue& RequireObject(const std::string& path, const JsonValue& root, const char* key) {
  auto it = root.object.find(key);
  if (it == root.object.end() || !it->second.is_object()) {
    throw std::runtime_error(path + ": OpenCLIP model config needs an object \"" + key + "\"");
  }
  return it->second;
}

}  // namespace

ModelConfig PresetModelConfig(const std::string& name) {
  ModelConfig config;
  if (name == "fmnist-tiny") return config;  // the defaults are this preset
  if (name == "vit-b-32" || name == "ViT-B-32") {
    config.name = "vit-b-32";
    config.embed_dim = 512;
    config.vision = VisionConfig{224, 3, 32, 768, 12, 12, 4.0};
    config.text = TextConfig{77, 49408, 512, 12, 8, 4.0, "bpe"};
    return config;
  }
  throw std::invalid_argument("unknown model '" + name +
                              "' (presets: fmnist-tiny, vit-b-32; or --model-config FILE.json)");
}

ModelConfig LoadModelConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open model config");
  std::stringstream text;
  text << in.rdbuf();
  JsonValue root = ParseJson(text.str(), path);
  if (!root.is_object()) throw std::runtime_error(path + ": model config must be a JSON object");
  RejectUnsupported(path, root);
  const JsonValue& vision = RequireObject(path, root, "vision_cfg");
  const JsonValue& text_cfg = RequireObject(path, root, "text_cfg");
  RejectUnsupported(path, vision);
  RejectUnsupported(path, text_cfg);

  ModelConfig config;
  auto slash = path.find_last_of('/');
  config.name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  config.embed_dim = ReadInt(path, root, "embed_dim", 512);

  VisionConfig& v = config.vision;
  v.image_size = ReadInt(path, vision, "image_size", 224);
  v.channels = ReadInt(path, vision, "channels", 3);
  v.patch_size = ReadInt(path, vision, "patch_size", 16);
  v.width = ReadInt(path, vision, "width", 768);
  v.layers = ReadInt(path, vision, "layers", 12);
  int head_width = ReadInt(path, vision, "head_width", 64);
  v.heads = ReadInt(path, vision, "heads", v.width / head_width);
  v.mlp_ratio = ReadDouble(path, vision, "mlp_ratio", 4.0);

  TextConfig& t = config.text;
  t.context_length = ReadInt(path, text_cfg, "context_length", 77);
  t.vocab_size = ReadInt(path, text_cfg, "vocab_size", 49408);
  t.width = ReadInt(path, text_cfg, "width", 512);
  t.heads = ReadInt(path, text_cfg, "heads", 8);
  t.layers = ReadInt(path, text_cfg, "layers", 12);
  t.mlp_ratio = ReadDouble(path, text_cfg, "mlp_ratio", 4.0);
  t.tokenizer = t.vocab_size == 259 ? "byte" : "bpe";
  auto tok = text_cfg.object.find("tokenizer");
  if (tok != text_cfg.object.end()) {
    if (!tok->second.is_string() || (tok->second.string != "byte" && tok->second.string != "bpe")) {
      throw std::runtime_error(Where(path, tok->second) + ": \"tokenizer\" must be byte or bpe");
    }
    t.tokenizer = tok->second.string;
  }
  try {
    ValidateModelConfig(config);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  return config;
}

void ValidateModelConfig(const ModelConfig& c) {
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (c.embed_dim <= 0) fail("embed_dim must be positive");
  if (c.vision.heads <= 0 || c.text.heads <= 0) fail("heads must be positive");
  if (c.vision.patch_size <= 0) fail("vision patch_size must be positive");
  if (c.vision.width % c.vision.heads) fail("vision width must be a multiple of its heads");
  if (c.text.width % c.text.heads) fail("text width must be a multiple of its heads");
  if (c.vision.image_size % c.vision.patch_size) {
    fail("vision image_size must be a multiple of patch_size");
  }
  if (c.vision.channels != 1 && c.vision.channels != 3) fail("vision channels must be 1 or 3");
  if (c.text.tokenizer == "byte" && c.text.vocab_size < 259) {
    fail("the byte tokenizer needs vocab_size >= 259");
  }
  if (c.text.context_length < 2) fail("text context_length must be at least 2");
}

}  // namespace dtrain::clip
