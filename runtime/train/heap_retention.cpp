#include "runtime/train/heap_retention.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace dtrain::clip {

void RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  // Blocks below 32 MiB (glibc's largest allowed threshold) come from the heap, and up to 1 GiB
  // of free heap top stays mapped instead of going back to the kernel after each step.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace dtrain::clip
