// RetainFreedHeapMemory: makes glibc's malloc keep freed blocks of up to 32 MiB in the process for
// reuse. LibTorch's CPU tensors come straight from malloc; by default every large activation of
// every step is a fresh mmap whose pages the kernel faults in and zeroes again (~100,000 page
// faults per training step of fmnist-tiny at batch 256). Process-wide; no-op off glibc.
#pragma once

namespace dtrain::clip {

void RetainFreedHeapMemory();

}  // namespace dtrain::clip
