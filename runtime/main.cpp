// dtrain-clip entry point (the trainer replaces this file).
#include <cstdio>

#include "runtime/version.h"

int main() {
  std::printf("dtrain-clip %s\n", dtrain::clip::ClipVersion());
  return 1;
}
