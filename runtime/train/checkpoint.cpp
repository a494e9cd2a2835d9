#include "runtime/train/checkpoint.h"

#include <dirent.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "runtime/formats/file_sync.h"
#include "runtime/train/checkpoint_parts.h"

namespace dtrain::clip {
namespace {

bool Exists(const std::string& path) {
  return access(path.c_str(), R_OK) == 0;
}

}  // namespace

void SaveCheckpoint(const std::string& path, const torch::nn::Module& model,
                    const torch::optim::Optimizer& optimizer, const TrainProgress& progress,
                    const std::string& model_name, int64_t flat_layout) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive weights;
  // clone(): a parameter may be a view into a larger buffer; save only its own elements.
  for (const auto& item : model.named_parameters()) {
    weights.write(item.key(), item.value().detach().clone());
  }
  for (const auto& item : model.named_buffers()) weights.write(item.key(), item.value(), true);
  archive.write("model", weights);
  torch::serialize::OutputArchive optimizer_state;
  optimizer.save(optimizer_state);
  archive.write("optimizer", optimizer_state);
  if (flat_layout > 0) archive.write("flat_layout", torch::tensor(flat_layout));
  archive.write("epoch", torch::tensor(progress.epoch));
  archive.write("step", torch::tensor(progress.step));
  archive.write("samples", torch::tensor(progress.samples));
  archive.write("epoch_samples", torch::tensor(progress.epoch_samples));
  archive.write("world_size", torch::tensor(progress.world_size));
  archive.write("global_batch", torch::tensor(progress.global_batch));
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    archive.write("rng_cpu", generator.get_state());
  }
  archive.write("model_name", c10::IValue(model_name));

  const std::string temp = CheckpointPartPath(path);
  try {
    archive.save_to(temp);
  } catch (const std::exception& e) {
    std::remove(temp.c_str());
    throw std::runtime_error(temp + ": cannot write checkpoint: " + e.what());
  }
  // A checkpoint the disk did not take must not replace the last one it did.
  const std::string unsynced = SyncToDisk(temp);
  if (!unsynced.empty()) {
    std::remove(temp.c_str());
    throw std::runtime_error(
        temp + ": cannot write checkpoint: the disk did not take it (fsync: " + unsynced + ")" +
        (Exists(path) ? "; " + path + " is kept as it was" : std::string()));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    throw std::runtime_error(path + ": cannot move the checkpoint into place: " + why);
  }
  const std::string folder = FolderOf(path);
  const std::string unnamed = SyncToDisk(folder);
  if (!unnamed.empty()) {
    throw std::runtime_error(path + ": written, but its folder " + folder +
                             " could not be synced (fsync: " + unnamed +
                             "): the disk may not keep it");
  }
}

namespace {

torch::serialize::InputArchive OpenCheckpoint(const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not a readable dtrain-clip checkpoint (" +
                             std::string(e.what()).substr(0, 200) + ")");
  }
  return archive;
}

// A checkpoint file's bytes, read on another rank; `name` says whose file it was.
torch::serialize::InputArchive OpenCheckpointBytes(const std::string& bytes,
                                                   const std::string& name) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    throw std::runtime_error(name + ": not a readable dtrain-clip checkpoint (" +
                             std::string(e.what()).substr(0, 200) + ")");
  }
  return archive;
}

void ReadWeights(const std::string& path, torch::serialize::InputArchive& archive,
                 torch::nn::Module& model) {
  torch::serialize::InputArchive weights;
  archive.read("model", weights);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    torch::Tensor saved;
    if (!weights.try_read(item.key(), saved)) {
      throw std::runtime_error(path + ": parameter " + item.key() +
                               " is missing: the checkpoint is of another model");
    }
    if (saved.sizes() != item.value().sizes()) {
      std::ostringstream why;
      why << path << ": parameter " << item.key() << " has shape " << saved.sizes()
          << " in the checkpoint but " << item.value().sizes() << " in the model";
      throw std::runtime_error(why.str());
    }
    item.value().copy_(saved);
  }
  for (auto& item : model.named_buffers()) {
    torch::Tensor saved;
    if (weights.try_read(item.key(), saved, true)) item.value().copy_(saved);
  }
}

}  // namespace

std::string CheckpointModelName(const std::string& path) {
  torch::serialize::InputArchive archive = OpenCheckpoint(path);
  c10::IValue name;
  if (!archive.try_read("model_name", name) || !name.isString()) {
    throw std::runtime_error(path + ": the checkpoint does not name its model (pass --model)");
  }
  return name.toStringRef();
}

void LoadCheckpointWeights(const std::string& path, torch::nn::Module& model) {
  torch::serialize::InputArchive archive = OpenCheckpoint(path);
  ReadWeights(path, archive, model);
}

namespace {

TrainProgress Restore(const std::string& path, torch::serialize::InputArchive& archive,
                      torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                      int64_t* flat_layout) {
  ReadWeights(path, archive, model);
  torch::serialize::InputArchive optimizer_state;
  archive.read("optimizer", optimizer_state);
  optimizer.load(optimizer_state);

  TrainProgress progress;
  torch::Tensor value;
  archive.read("epoch", value);
  progress.epoch = value.item<int64_t>();
  archive.read("step", value);
  progress.step = value.item<int64_t>();
  archive.read("samples", value);
  progress.samples = value.item<int64_t>();
  // Absent from checkpoints written before mid-epoch saves: an epoch boundary.
  if (archive.try_read("epoch_samples", value)) progress.epoch_samples = value.item<int64_t>();
  if (archive.try_read("world_size", value)) progress.world_size = value.item<int64_t>();
  if (archive.try_read("global_batch", value)) progress.global_batch = value.item<int64_t>();
  if (flat_layout) {
    *flat_layout = archive.try_read("flat_layout", value) ? value.item<int64_t>() : 1;
  }
  torch::Tensor rng;
  archive.read("rng_cpu", rng);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(rng);
  return progress;
}

}  // namespace

TrainProgress LoadCheckpoint(const std::string& path, torch::nn::Module& model,
                             torch::optim::Optimizer& optimizer, int64_t* flat_layout) {
  torch::serialize::InputArchive archive = OpenCheckpoint(path);
  return Restore(path, archive, model, optimizer, flat_layout);
}

TrainProgress LoadCheckpointBytes(const std::string& bytes, const std::string& name,
                                  torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                  int64_t* flat_layout) {
  torch::serialize::InputArchive archive = OpenCheckpointBytes(bytes, name);
  return Restore(name, archive, model, optimizer, flat_layout);
}

std::string ReadCheckpointBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw std::runtime_error(path + ": cannot read the checkpoint");
  return bytes;
}

std::string ResolveResumePath(const std::string& resume, const std::string& checkpoint_dir) {
  if (resume.empty()) return "";
  if (resume != "latest") return Exists(resume) ? resume : "";
  if (Exists(checkpoint_dir + "/epoch_latest.pt")) return checkpoint_dir + "/epoch_latest.pt";
  std::string best;
  long best_epoch = -1;
  if (DIR* dir = opendir(checkpoint_dir.c_str())) {
    while (dirent* entry = readdir(dir)) {
      long epoch = -1;
      char tail[8] = {0};
      if (std::sscanf(entry->d_name, "epoch_%ld.%7s", &epoch, tail) == 2 &&
          std::strcmp(tail, "pt") == 0 && epoch > best_epoch) {
        best_epoch = epoch;
        best = checkpoint_dir + "/" + entry->d_name;
      }
    }
    closedir(dir);
  }
  return best;
}

}  // namespace dtrain::clip
