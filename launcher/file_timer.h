// torchrun's worker watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1): a rank arms a deadline with
// torch's FileTimerClient (`with timer.expires(after=60):`) through the FIFO named in
// TORCHELASTIC_TIMER_FILE, and is killed with the request's signal when the deadline passes.
// torchrun's agent serves that FIFO on each node; dtrain has no agent there, so each rank runs
// under templates/file_timer_server.py instead (with the job's Python), on every transport.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

struct FileTimer {
  bool on = false;
  // TORCHELASTIC_TIMER_FILE as given (the FIFO of rank R is "<it>.rank-R"); "": a fresh path
  // in the node's temporary folder.
  std::string path;
};

// Asked as torchrun is asked: TORCHELASTIC_ENABLE_FILE_TIMER=1 where dtrain runs, or in the
// ranks' environment (-x, the cluster file's env), which wins.
FileTimer FileTimerOf(const ClusterSpec& spec);

// `argv` run under the watchdog: {python, "-c", <server>, path, "--", argv...}, the same for
// every rank (one Slurm step runs one command; the watchdog reads its rank from RANK); python:
// the job's (JobPython), else the cluster file's `python:`, else python3.
std::vector<std::string> UnderFileTimer(const std::vector<std::string>& argv,
                                        const ClusterSpec& spec, const FileTimer& timer);

}  // namespace dtrain
