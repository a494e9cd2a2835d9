#include "runtime/model/open_clip_weights.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "runtime/formats/safetensors_file.h"

namespace dtrain::clip {
namespace {

const char* kTextPrefix = "text.";
const char* kConvKey = "visual.conv1.weight";
// Buffers OpenCLIP versions have kept in state_dicts; recomputed here, so not needed.
const std::set<std::string> kIgnoredKeys = {"attn_mask", "visual.attn_mask"};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

torch::ScalarType ScalarTypeOf(const std::string& dtype, const std::string& path) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
      {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
      {"BOOL", torch::kBool}};
  auto it = types.find(dtype);
  if (it == types.end()) throw std::runtime_error(path + ": unsupported dtype " + dtype);
  return it->second;
}

std::map<std::string, torch::Tensor> ReadSafetensors(const std::string& path) {
  const SafetensorsHeader header = ReadSafetensorsHeader(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& e : header.entries) {
    std::string bytes = ReadSafetensorsBytes(header, e);
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(ScalarTypeOf(e.dtype, path)));
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    tensors[e.name] = t;
  }
  return tensors;
}

// A torch.save file: {name: tensor} or a checkpoint {"state_dict": {...}, ...}.
std::map<std::string, torch::Tensor> ReadTorchSave(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue root;
  try {
    root = torch::jit::pickle_load(data);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not a torch.save file or safetensors (" +
                             std::string(e.what()).substr(0, 200) + ")");
  }
  if (root.isGenericDict()) {
    auto dict = root.toGenericDict();
    for (const auto& item : dict) {
      if (item.key().isString() && item.key().toStringRef() == "state_dict") {
        root = item.value();
        break;
      }
    }
  }
  if (!root.isGenericDict()) {
    throw std::runtime_error(path + ": holds no state_dict (expected a dict of tensors)");
  }
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : root.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) {
      throw std::runtime_error(path + ": the state_dict has an entry that is not name -> tensor");
    }
    tensors[item.key().toStringRef()] = item.value().toTensor();
  }
  return tensors;
}

}  // namespace

std::string OpenClipKey(const std::string& name) {
  if (name.rfind(kTextPrefix, 0) == 0) return name.substr(std::string(kTextPrefix).size());
  return name;
}

void ExportOpenClipWeights(ClipModel& model, const std::string& path) {
  std::vector<SafetensorsTensor> out;
  for (const auto& item : model->named_parameters()) {
    torch::Tensor t = item.value().detach().to(torch::kCPU, torch::kFloat32);
    if (item.key() == kConvKey && t.size(1) == 1) t = (t / 3.0).expand({-1, 3, -1, -1});
    t = t.contiguous();
    SafetensorsTensor s;
    s.name = OpenClipKey(item.key());
    s.dtype = "F32";
    s.shape = t.sizes().vec();
    s.bytes.assign(static_cast<const char*>(t.data_ptr()), t.numel() * sizeof(float));
    out.push_back(std::move(s));
  }
  WriteSafetensors(path, out, {{"format", "pt"}, {"producer", "dtrain-clip"}});
}

void LoadOpenClipWeights(ClipModel& model, const std::string& path) {
  std::map<std::string, torch::Tensor> file =
      EndsWith(path, ".safetensors") ? ReadSafetensors(path) : ReadTorchSave(path);
  std::map<std::string, torch::Tensor> by_key;
  for (auto& [key, tensor] : file) {
    const std::string k = key.rfind("module.", 0) == 0 ? key.substr(7) : key;
    if (!kIgnoredKeys.count(k)) by_key[k] = tensor;
  }
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : model->named_parameters()) {
    const std::string key = OpenClipKey(item.key());
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      throw std::runtime_error(path + ": has no '" + key + "' (the model '" + model->config().name +
                               "' needs it): another architecture?");
    }
    torch::Tensor t = it->second.to(torch::kFloat32);
    torch::Tensor target = item.value();
    if (item.key() == kConvKey && t.dim() == 4 && t.size(1) == 3 && target.size(1) == 1) {
      t = t.sum(1, /*keepdim=*/true);
    }
    if (t.sizes() != target.sizes()) {
      std::ostringstream why;
      why << path << ": '" << key << "' has shape " << t.sizes() << " but the model '"
          << model->config().name << "' needs " << target.sizes();
      throw std::runtime_error(why.str());
    }
    target.copy_(t);
    used.insert(key);
  }
  for (const auto& [key, tensor] : by_key) {
    if (!used.count(key)) {
      throw std::runtime_error(path + ": '" + key + "' is not a parameter of the model '" +
                               model->config().name + "' (another architecture, or a variant " +
                               "this trainer does not build)");
    }
  }
}

}  // namespace dtrain::clip
