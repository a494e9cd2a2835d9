// ModelConfig: the shape of a CLIP model (towers, widths, tokenizer), from a preset name or an
// OpenCLIP model-config JSON file. Torch-free so flag parsing and tests can use it cheaply.
#pragma once

#include <string>

namespace dtrain::clip {

// Vision tower: a ViT over `channels` x image_size x image_size images cut into patches.
struct VisionConfig {
  int image_size = 28;
  int channels = 1;
  int patch_size = 4;
  int width = 128;
  int layers = 4;
  int heads = 4;
  double mlp_ratio = 4.0;
};

// Text tower: causal transformer over `context_length` tokens pooled at the end-of-text token.
struct TextConfig {
  int context_length = 32;
  int vocab_size = 259;
  int width = 128;
  int layers = 2;
  int heads = 4;
  double mlp_ratio = 4.0;
  std::string tokenizer = "byte";  // byte | bpe
};

// A whole model: both towers and the shared embedding width.
struct ModelConfig {
  std::string name = "fmnist-tiny";
  int embed_dim = 128;
  VisionConfig vision;
  TextConfig text;
};

// Preset by name (fmnist-tiny, vit-b-32); throws std::invalid_argument listing the presets.
ModelConfig PresetModelConfig(const std::string& name);

// Reads an OpenCLIP model-config JSON file (embed_dim, vision_cfg, text_cfg). Keys OpenCLIP uses
// for variants this trainer does not build (e.g. timm_model_name) are errors; purely cosmetic
// keys are ignored. Throws std::runtime_error naming the file and the key.
ModelConfig LoadModelConfig(const std::string& path);

// Throws std::invalid_argument when widths/heads/patches do not fit together.
void ValidateModelConfig(const ModelConfig& config);

}  // namespace dtrain::clip
