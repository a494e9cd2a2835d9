// The rule about the node's shared memory (/dev/shm): the libraries' segments no process holds
// there are leftovers of processes killed before they removed them (a job's SharedMemory and
// semaphores, PyTorch's and NCCL's segments, after SIGKILL or the OOM killer took the resource
// tracker too). They take the node's memory, and once /dev/shm is nearly full the next job's NCCL
// and data-loader workers fail there: an error. Files of other names no process holds may be a
// job's own (a dataset copied there): a warning where they take much of it, never an error. Only
// what no process holds counts: a running job's own segments never make its node unfit.
// Thresholds and their sources are in dtrain-doctor(1).
#include <utility>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"
#include "launcher/age_text.h"

namespace dtrain {

using checks::KibSize;
using checks::Make;
using checks::Reached;

namespace {

// Leftovers below this are noise (a semaphore or two, a small segment).
constexpr long long kLeftoverFloorKib = 64 << 10;  // 64 MiB
// Leftovers of this much, or of this share of /dev/shm, are worth a warning.
constexpr long long kLeftoverWarningKib = 1 << 20;  // 1 GiB
constexpr double kLeftoverShare = 0.25;
// Below this much free, NCCL's segments and a data loader's batches no longer fit: the rule that
// warns of a small /dev/shm (node_checks.cpp) uses the same floor.
constexpr long long kFreeErrorKib = 512 << 10;

// The biggest files no process holds (the libraries' segments alone with `segments_only`), up
// to three ("psm_1f2e (500 MiB, bob, 3 h old)"), the rest counted, and their paths for rm.
std::pair<std::string, std::string> Unheld(const SharedMemory& shm, bool segments_only) {
  std::string listed, paths;
  long long shown = 0;
  for (const SharedMemoryFile& f : shm.files) {
    if (f.held != 0 || (segments_only && !f.segment) || shown == 3) continue;
    listed += fmt::format("{}{} ({}, {}, {} old)", shown ? "; " : "", f.name, KibSize(f.kib),
                          f.owner, AgeText(f.age_s));
    paths += " /dev/shm/" + f.name;
    ++shown;
  }
  const long long all = segments_only ? shm.unheld_segments : shm.unheld_files;
  if (all > shown) {
    listed += fmt::format("{}{} more", shown ? "; " : "", all - shown);
    paths += " ...";
  }
  return {listed, paths};
}

}  // namespace

std::vector<Finding> CheckSharedMemoryLeftovers(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    const SharedMemory& shm = n->health.shm;
    const long long size_kib = n->shm_kib;
    if (size_kib <= 0) continue;
    const std::string free = fmt::format("{} of {} free", KibSize(shm.free_kib), KibSize(size_kib));
    // The libraries' segments no process holds, with /dev/shm nearly full: the node fails the
    // next job's shared memory until they are removed.
    if (shm.free_kib >= 0 && shm.free_kib < kFreeErrorKib &&
        shm.unheld_segment_kib >= kLeftoverFloorKib) {
      const auto [listed, paths] = Unheld(shm, true);
      out.push_back(Make(
          Severity::kError, "shm-leftovers", "shm", {n->host},
          fmt::format("node {}: /dev/shm is nearly full ({}), and {} of it is {} shared memory "
                      "segment(s) no process holds: {}",
                      n->host, free, KibSize(shm.unheld_segment_kib), shm.unheld_segments, listed),
          fmt::format("they are what processes killed outright (SIGKILL, the OOM killer) could "
                      "not remove: remove them as their owner or root (rm{}), or reboot the node; "
                      "until then NCCL and data-loader workers fail there for want of shared "
                      "memory (a bus error, 'No space left on device')",
                      paths)));
      continue;
    }
    // Files no process holds, of any name, taking much of the node's memory: leftovers, or a
    // job's files put there on purpose (a dataset copied into memory).
    if (shm.unheld_kib < kLeftoverFloorKib ||
        (shm.unheld_kib < kLeftoverWarningKib &&
         shm.unheld_kib < kLeftoverShare * static_cast<double>(size_kib))) {
      continue;
    }
    const auto [listed, paths] = Unheld(shm, false);
    out.push_back(Make(
        Severity::kWarning, "shm-leftovers", "shm", {n->host},
        fmt::format("node {}: {} of /dev/shm is in {} file(s) no process holds ({}); {}", n->host,
                    KibSize(shm.unheld_kib), shm.unheld_files, listed, free),
        fmt::format("they hold the node's memory (tmpfs) from its jobs: remove what no job needs "
                    "as its owner or root (rm{}); shared memory segments (psm_*, torch_*, "
                    "nccl-*) are what processes killed outright could not remove",
                    paths)));
  }
  return out;
}

}  // namespace dtrain
