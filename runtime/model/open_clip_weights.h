// Weights in OpenCLIP's layout: its state_dict names (`visual.*` as here, the text tower's at the
// top level: `token_embedding.weight`, `transformer.resblocks.N.*`, `ln_final.*`,
// `text_projection`, `positional_embedding`) and its 3-channel patch embedding.
//
// A 1-channel model (fmnist-tiny) exports its conv1 kernel spread evenly over RGB (each channel
// w/3), so OpenCLIP given the grey image on all three channels computes the same features;
// loading a 3-channel kernel into a 1-channel model sums the channels, the same identity backwards.
#pragma once

#include <string>

#include "runtime/model/clip_model.h"

namespace dtrain::clip {

// Our parameter name -> OpenCLIP's state_dict key.
std::string OpenClipKey(const std::string& name);

// Writes `model`'s weights as float32 safetensors under OpenCLIP's names, for
// open_clip.create_model(<matching config>, pretrained=path). Throws naming the path.
void ExportOpenClipWeights(ClipModel& model, const std::string& path);

// Loads OpenCLIP weights into `model`: a .safetensors file, or a torch.save file (.pt/.bin) that
// holds a state_dict or a training checkpoint with one under "state_dict" ("module." prefixes
// from DDP are dropped). Every parameter must be there with a matching shape; a key the model
// does not have is an error too (another architecture). Throws naming the path and the key.
void LoadOpenClipWeights(ClipModel& model, const std::string& path);

}  // namespace dtrain::clip
