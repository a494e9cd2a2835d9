// BatchUpload: a batch's images and tokens from the loaders to the training device, in two
// halves that may run on two threads: Send() on the thread that stages batches (BatchStager),
// Receive() on the step's thread.
//
// Float pixels (normalised by the loaders: the CPU default) are used in place on the CPU and
// copied to a GPU. 8-bit pixels (DataOptions::raw_pixels: the default on CUDA) cross as bytes, a
// quarter of float32's traffic, and are normalised on the device with the loaders' mean and std.
// On CUDA, Send() copies the bytes into pinned memory and queues their copy and the tokens' on a
// copy stream of its own; Receive() makes the compute stream wait on that copy's event only, so
// the copy overlaps the work already queued (the previous step) and neither thread waits for the
// device.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "runtime/data/data_source.h"

namespace dtrain::clip {

class BatchUpload {
 public:
  // What Send() started and Receive() finishes.
  struct InFlight {
    torch::Tensor pixels;  // float pixels, or 8-bit ones still to normalise (raw)
    torch::Tensor tokens;  // [B, L] int64
    bool raw = false;
    std::shared_ptr<void> copied;  // CUDA: the event recorded after the copies
  };

  BatchUpload(const torch::Device& device, int channels);
  ~BatchUpload();
  BatchUpload(const BatchUpload&) = delete;
  BatchUpload& operator=(const BatchUpload&) = delete;

  // `tokens` [B, L] int64 on the host (pinned on CUDA). On the CPU the result may borrow
  // `batch`'s pixel buffer: keep the batch alive while the images are in use.
  InFlight Send(HostBatch& batch, const torch::Tensor& tokens);
  // [B, C, H, W] float32 images and the tokens on the device, ordered after their copies on the
  // current stream.
  void Receive(InFlight& sent, torch::Tensor* images, torch::Tensor* tokens) const;

 private:
  torch::Tensor Normalise(const torch::Tensor& bytes) const;  // uint8 -> float, on its device

  torch::Device device_;
  torch::Tensor scale_, shift_;  // [1, C, 1, 1] on the device: x * scale + shift
  struct CudaCopy;               // the copy stream (CUDA builds)
  std::unique_ptr<CudaCopy> cuda_;
};

}  // namespace dtrain::clip
