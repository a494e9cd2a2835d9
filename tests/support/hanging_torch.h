// Test support for stall tests: a real torch.distributed (Gloo) program, run with the .venv's
// python, one of whose ranks stops entering collectives: it sleeps before its fourth all_reduce
// (at line 8 of the script) while the others wait in it.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/support/test_paths.h"

namespace dtrain::testing {

inline const std::string kVenvPython = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/python3";

// Whether kVenvPython exists and imports torch.
inline bool HaveTorch() {
  return ::access(kVenvPython.c_str(), X_OK) == 0 &&
         std::system((kVenvPython + " -c 'import torch' 2>/dev/null").c_str()) == 0;
}

// The program's text; rank `stuck` sleeps for an hour at step 3.
inline std::string HangingTorchScript(int stuck) {
  return R"(import os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=600))
rank = dist.get_rank()
t = torch.ones(4)
for step in range(100):
    if rank == )" +
         std::to_string(stuck) + R"( and step == 3:
        time.sleep(3600)
    dist.all_reduce(t)
    print(f"step {step}", flush=True)
)";
}

}  // namespace dtrain::testing
