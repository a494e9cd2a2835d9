// RunTraining: `dtrain-clip train` from parsed options to the last metrics line. Reads top to
// bottom: set up, resume, broadcast, then per epoch: steps, checkpoint, zero-shot evaluation.
#pragma once

#include "runtime/config/train_options.h"
#include "runtime/dist/train_collectives.h"

namespace dtrain::clip {

// Returns the process exit status (0 on success). Throws std::runtime_error with context on
// bad data, files or devices.
int RunTraining(const TrainOptions& options, TrainCollectives& collectives);

}  // namespace dtrain::clip
