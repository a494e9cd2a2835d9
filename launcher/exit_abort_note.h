// A rank that printed "terminate called without an active exception" and died by SIGABRT as it
// exited. In a torch.distributed program that never called destroy_process_group this is torch's
// own race at interpreter exit (a Gloo worker thread drops the last C++ reference to a tensor
// after the main thread began Py_FinalizeEx; taking the GIL then ends the thread by forced
// unwind, which std::terminate stops: pytorch/pytorch#190489), and it happens under torchrun as
// under dtrain. The launcher cannot close that window from outside the process; it can say what
// does, instead of leaving a finished job's abort unexplained.
#pragma once

#include <string>
#include <vector>

#include "launcher/exit_status.h"

namespace dtrain {

// The note for the failure report ("dtrain: note: ...\n"), or "" when `status` and the last lines
// of the rank's log (`tail`) are not that abort: SIGABRT, and the last line that says anything
// is std::terminate's "terminate called without an active exception".
std::string ExitAbortNote(const ExitStatus& status, const std::vector<std::string>& tail);

}  // namespace dtrain
