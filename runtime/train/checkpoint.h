// Checkpoints: model parameters, AdamW state, progress counters and the CPU RNG in one file,
// written atomically (temp file, fsync, rename): a kill during a save, or a disk that fails the
// write (an error of fsync's), leaves the previous checkpoint intact and usable.
#pragma once

#include <torch/torch.h>

#include <string>

namespace dtrain::clip {

// Where training stands when a checkpoint is written.
struct TrainProgress {
  int64_t epoch = 0;    // epochs completed
  int64_t step = 0;     // optimizer steps taken
  int64_t samples = 0;  // samples seen (all ranks)
  // Mid-epoch position (--save-every-n-steps): samples of epoch `epoch` already trained on, a
  // prefix of that epoch's global order over all ranks; 0 at an epoch boundary. With the world
  // size and global batch of the run that wrote it (0: not recorded, as in older checkpoints).
  int64_t epoch_samples = 0;
  int64_t world_size = 0;
  int64_t global_batch = 0;
};

// Writes `path` atomically. Throws std::runtime_error naming the path.
// `flat_layout`: the FlatLayout the optimizer's flat state is in (0: not recorded).
void SaveCheckpoint(const std::string& path, const torch::nn::Module& model,
                    const torch::optim::Optimizer& optimizer, const TrainProgress& progress,
                    const std::string& model_name, int64_t flat_layout = 0);

// Restores what SaveCheckpoint wrote into `model` and `optimizer` (same architecture) and the
// CPU RNG; returns the progress (fields an older checkpoint lacks read as 0). Throws
// std::runtime_error naming the path and the mismatch.
// `flat_layout`, when given, is set to the layout recorded (1, FlatLayout::kModelOrder, for a
// checkpoint that records none).
TrainProgress LoadCheckpoint(const std::string& path, torch::nn::Module& model,
                             torch::optim::Optimizer& optimizer, int64_t* flat_layout = nullptr);

// The same from a checkpoint file's bytes (read on another rank: ReadCheckpointBytes); `name`
// says whose file it was in errors.
TrainProgress LoadCheckpointBytes(const std::string& bytes, const std::string& name,
                                  torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                  int64_t* flat_layout = nullptr);

// A checkpoint file, whole. Throws std::runtime_error naming the path.
std::string ReadCheckpointBytes(const std::string& path);

// The model a checkpoint was written for (--model's value: a preset or a config path).
std::string CheckpointModelName(const std::string& path);

// Restores only the model's weights from a checkpoint (export, evaluation).
void LoadCheckpointWeights(const std::string& path, torch::nn::Module& model);

// `--resume` resolved on this rank: "latest" -> <dir>/epoch_latest.pt, else the highest
// epoch_N.pt, else "" (none here); any other value is a path, "" where this rank cannot read it
// (the caller says so when no rank can: node_local_checkpoints.h).
std::string ResolveResumePath(const std::string& resume, const std::string& checkpoint_dir);

}  // namespace dtrain::clip
