// Shared memory segments a rank's processes leave in /dev/shm. A process killed outright (SIGKILL
// after the grace period, a node's OOM killer, a whole process group killed) cannot remove the
// segments it made (Python's multiprocessing.shared_memory and its semaphores, PyTorch's
// file_system sharing, NCCL, Intel OpenMP, Open MPI), and Python's resource tracker, which removes
// them when its program dies, dies with it. They stay in the node's memory until removed, and a
// node whose /dev/shm fills fails the next job's NCCL and data-loader workers (a bus error). So
// when a rank ends and its processes are gone, its wrapper (the SSH wrapper, the Slurm task
// wrapper) removes the segments of those libraries that the user's processes wrote since the
// rank started and no process holds; the local transport does it once its ranks are all gone.
// templates/shm_segments.sh holds both that and the listing the doctor's probe reports
// (doctor's shm-leftovers check).
#pragma once

#include <ctime>
#include <string>
#include <string_view>

namespace dtrain {

// templates/shm_segments.sh: the shell functions dtrain_shm_files and dtrain_shm_remove, which the
// SSH and Slurm wrappers and the doctor's probe put in front of their own script.
std::string_view ShmSegmentsScript();

// Runs dtrain_shm_remove on this machine (at most `timeout_s`) for the segments written at or
// after `since` (seconds since the epoch): the line it prints ("dtrain: HOST: removed 2 shared
// memory segment(s) ..."), or "" when it removed none.
std::string RemoveShmLeftovers(std::time_t since, double timeout_s = 5);

}  // namespace dtrain
