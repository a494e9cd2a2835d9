// PixelUpload: a batch's images from the loaders to the training device, as normalised floats.
//
// Float pixels (normalised by the loaders: the CPU default) are used in place on the CPU and
// copied to a GPU. 8-bit pixels (DataOptions::raw_pixels: the default on CUDA) cross as bytes, a
// quarter of float32's traffic, and are normalised on the device with the loaders' mean and std.
// On CUDA the bytes go through one of two pinned staging buffers and a copy stream; the compute
// stream waits on the copy's event only, so the copy overlaps the work already queued (the
// previous step) and the host never waits for the device here.
#pragma once

#include <torch/torch.h>

#include <array>
#include <memory>

#include "runtime/data/data_source.h"

namespace dtrain::clip {

class PixelUpload {
 public:
  PixelUpload(const torch::Device& device, int channels);
  ~PixelUpload();
  PixelUpload(const PixelUpload&) = delete;
  PixelUpload& operator=(const PixelUpload&) = delete;

  // [B, C, H, W] float32 on the device. A CPU result may borrow `batch`'s buffer: keep the batch
  // alive while the tensor is in use.
  torch::Tensor Upload(HostBatch& batch);

 private:
  torch::Tensor Normalise(const torch::Tensor& bytes) const;  // uint8 -> float, on its device

  torch::Device device_;
  torch::Tensor scale_, shift_;  // [1, C, 1, 1] on the device: x * scale + shift
  struct CudaCopy;               // the copy stream, staging buffers and events (CUDA builds)
  std::unique_ptr<CudaCopy> cuda_;
};

}  // namespace dtrain::clip
