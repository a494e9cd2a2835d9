// The rules about the host a job runs on: free space where it writes, whether a write there
// reaches the disk and ends in time (against the other nodes'), swap, memory against the other
// nodes', and the clock source. Thresholds and their sources are in dtrain-doctor(1).
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Join;
using checks::KibSize;
using checks::Make;
using checks::Reached;

namespace {

// Below this much free space a job cannot even write its logs and compile caches (error); below
// the second one checkpoints and traces of a real model will not fit (warning).
constexpr long long kFreeErrorKib = 1LL << 20;     // 1 GiB
constexpr long long kFreeWarningKib = 10LL << 20;  // 10 GiB

// A node with this much less memory than the best-equipped one: on nodes bought alike, a memory
// module failed or was disabled at boot (a few percent is firmware and kernel reservations).
constexpr double kMemoryShortfall = 0.03;

// A place where the job writes, as said: "log dir /data/logs", or "/tmp" alone.
std::string Place(const std::string& what, const std::string& path) {
  return what == path ? path : what + " " + path;
}

// The free space the probe measured where a test write went (the last such line), or null.
const FreeSpace* SpaceOf(const NodeFacts& n, const WriteTest& w) {
  const FreeSpace* found = nullptr;
  for (const FreeSpace& s : n.health.free_space) {
    if (s.what == w.what) found = &s;
  }
  return found;
}

// Where a test write went, as said ("/scratch/logs (the nearest existing folder of log dir
// /scratch/logs/job)"), and its drive ("the drive under /scratch", from the free space's mount).
std::pair<std::string, std::string> WritePlace(const NodeFacts& n, const WriteTest& w) {
  const std::string named = Place(w.what, w.path);
  const FreeSpace* space = SpaceOf(n, w);
  const std::string mount = space ? space->mount : "";
  return {w.folder == w.path ? named : w.folder + " (the nearest existing folder of " + named + ")",
          mount.empty() ? "its drive" : "the drive under " + mount};
}

// The type of the file system a test write went to ("ext4"; "" where the probe could not tell).
std::string FileSystemType(const NodeFacts& n, const WriteTest& w) {
  const FreeSpace* space = SpaceOf(n, w);
  return space ? space->type : "";
}

// Whether a file system of this type lies on a drive of the node's own, not on storage the nodes
// share (NFS, Lustre, GPFS, BeeGFS, WekaFS, CephFS, a FUSE mount of an object store) nor in
// memory (tmpfs): a write there that hangs is the node's own fault, with or without another node
// to compare it with. Types not listed are judged as shared.
bool OnOwnDrive(const std::string& type) {
  static const std::set<std::string> kOwn = {
      "ext2", "ext3",     "ext4",   "xfs",   "btrfs", "f2fs",  "jfs",     "reiserfs",
      "zfs",  "bcachefs", "nilfs2", "exfat", "vfat",  "ntfs3", "fuseblk", "overlay"};
  return kOwn.count(type) > 0;
}

std::string NodesWord(const std::vector<std::string>& hosts) {
  return fmt::format("{} {}", hosts.size() == 1 ? "node" : "nodes", Join(hosts));
}

// "nodes a, b, c" for up to three, else "N `many`" ("12 nodes", "12 other nodes").
std::string FewNodesWord(const std::vector<std::string>& hosts, const std::string& many) {
  return hosts.size() <= 3 ? NodesWord(hosts) : fmt::format("{} {}", hosts.size(), many);
}

}  // namespace

std::vector<Finding> CheckFreeSpace(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    // One finding per file system, naming every place of the job on it.
    std::vector<std::string> mounts;
    std::map<std::string, std::vector<std::string>> places;
    std::map<std::string, long long> free;
    for (const FreeSpace& s : n->health.free_space) {
      if (!places.count(s.mount)) mounts.push_back(s.mount);
      places[s.mount].push_back(Place(s.what, s.path));
      free[s.mount] = s.free_kib;
    }
    for (const std::string& mount : mounts) {
      const long long kib = free[mount];
      if (kib < 0 || kib >= kFreeWarningKib) continue;
      out.push_back(Make(kib < kFreeErrorKib ? Severity::kError : Severity::kWarning, "disk", "",
                         {n->host},
                         fmt::format("node {}: {} free on {} ({})", n->host, KibSize(kib), mount,
                                     Join(places[mount])),
                         "free space there, or point workdir, log_dir or TMPDIR elsewhere: ranks "
                         "write logs, traces, checkpoints and compile caches"));
    }
  }
  return out;
}

std::vector<Finding> CheckDiskWrites(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    for (const WriteTest& w : n->health.write_tests) {
      if (w.result == "ok" || w.result.rfind("timeout ", 0) == 0) continue;  // CheckWriteHangs
      const auto [place, drive] = WritePlace(*n, w);
      const bool io_error = w.result.find("Input/output error") != std::string::npos;
      const bool read_only = w.result.find("Read-only file system") != std::string::npos;
      const bool no_space = w.result.find("No space left") != std::string::npos;
      std::string remedy;
      if (io_error || read_only) {
        remedy = drive +
                 " failed a write, or the kernel turned its file system read-only after write "
                 "errors (dmesg | grep -i -e 'I/O error' -e EXT4-fs -e XFS): check it (smartctl "
                 "-a, nvme smart-log), repair or replace it, and keep the node out of jobs until "
                 "then";
      } else if (no_space || w.result.find("quota") != std::string::npos) {
        remedy = "free space there, or point workdir, log_dir or TMPDIR elsewhere";
      } else {
        remedy =
            "make it writable for this user (owner, mode), or point workdir, log_dir or "
            "TMPDIR elsewhere";
      }
      // A workdir may be read-only on purpose (code on a read-only share, the ranks writing
      // elsewhere); a failed write to its drive may not be.
      if (read_only && w.what == "workdir") {
        remedy =
            "if it is read-only on purpose (code on a read-only share), point log_dir and the "
            "job's outputs elsewhere; else " +
            remedy;
      }
      // The node's own faults are errors (a launch leaves the node out, --drain drains it): its
      // drive, and a disk of its own that is full. A quota or a folder's owner is the user's or
      // the site's, and would be the same on every node: a warning.
      const bool node_fault = io_error || no_space || (read_only && w.what != "workdir");
      const Severity severity = node_fault ? Severity::kError : Severity::kWarning;
      out.push_back(Make(severity, "disk-write", "", {n->host},
                         fmt::format("node {}: cannot write in {}: {}", n->host, place, w.result),
                         remedy));
    }
  }
  return out;
}

std::vector<Finding> CheckWriteHangs(const std::vector<NodeFacts>& nodes) {
  // Who wrote in each place in time, and whose write there hung: by what and path ("log dir",
  // "/data/logs").
  using Where = std::pair<std::string, std::string>;
  std::map<Where, std::vector<std::string>> in_time;
  std::map<Where, std::vector<std::pair<const NodeFacts*, const WriteTest*>>> hung;
  std::vector<Where> places;  // hung somewhere, in the order first seen
  for (const NodeFacts* n : Reached(nodes)) {
    for (const WriteTest& w : n->health.write_tests) {
      if (w.result == "ok") in_time[{w.what, w.path}].push_back(n->host);
      if (w.result.rfind("timeout ", 0) != 0) continue;
      if (!hung.count({w.what, w.path})) places.push_back({w.what, w.path});
      hung[{w.what, w.path}].push_back({n, &w});
    }
  }
  std::vector<Finding> out;
  for (const Where& where : places) {
    const auto& writes = hung[where];
    const auto others = in_time.find(where);
    const auto [first, first_write] = writes.front();
    const std::string type = FileSystemType(*first, *first_write);
    if (others == in_time.end() && writes.size() == 1 && OnOwnDrive(type)) {
      // Alone, on a drive of the node's own: nothing else can be at fault.
      const auto [place, drive] = WritePlace(*first, *first_write);
      out.push_back(Make(
          Severity::kError, "disk-write", "", {first->host},
          fmt::format("node {}: writing 64 KiB in {} had not ended after {} s ({}, a drive of "
                      "the node's own)",
                      first->host, place, first_write->result.substr(8), type),
          fmt::format("{} hangs or is swamped: a rank that writes a checkpoint or log there "
                      "stalls every other rank. Look for I/O errors and hung tasks (dmesg | grep "
                      "-i -e 'I/O error' -e 'blocked for more than'), at the drive (iostat -x 1, "
                      "smartctl -a, nvme smart-log), and keep the node out of jobs until a write "
                      "there ends in time",
                      drive)));
      continue;
    }
    if (others == in_time.end()) {
      // Every node that wrote there hung: storage they share swamped or hanging for all, or
      // (drives of their own) a burst of writes on every node; no node is at fault more than
      // another. Alone where the file system's type does not tell: a drive of the node's own or
      // storage shared, nothing tells which.
      std::vector<std::string> hosts;
      bool all_own = true;
      for (const auto& [n, w] : writes) {
        hosts.push_back(n->host);
        all_own = all_own && OnOwnDrive(FileSystemType(*n, *w));
      }
      const auto [place, drive] = WritePlace(*first, *first_write);
      std::string what = hosts.size() == 1 ? drive : "the storage there";
      std::string why =
          hosts.size() == 1 ? "" : " for every node (a shared file system under load?)";
      if (hosts.size() > 1 && all_own) {
        what = "each node's own drive there";
        why = " (" + type + "; a burst of writes on every node?)";
      }
      out.push_back(Make(
          Severity::kWarning, "disk-write", "", hosts,
          fmt::format("{}: writing 64 KiB in {} had not ended after {} s{}",
                      FewNodesWord(hosts, "nodes"), place, first_write->result.substr(8),
                      hosts.size() == 1 ? "" : " on any of them"),
          what + " hangs or is swamped" + why +
              ": a rank that writes a checkpoint or log there stalls every other rank (dmesg for "
              "I/O errors and hung tasks, iostat -x 1)"));
      continue;
    }
    // The others wrote there in time: this node's own drive, or its own mount of a shared file
    // system, hangs.
    const std::vector<std::string>& wrote = others->second;
    for (const auto& [n, w] : writes) {
      const auto [place, drive] = WritePlace(*n, *w);
      out.push_back(Make(
          Severity::kError, "disk-write", "", {n->host},
          fmt::format(
              "node {}: writing 64 KiB in {} had not ended after {} s, while {} wrote there in "
              "time",
              n->host, place, w->result.substr(8), FewNodesWord(wrote, "other nodes")),
          fmt::format("{} (or node {}'s mount of it) hangs: a rank that writes a checkpoint or log "
                      "there stalls every other rank. Look for I/O errors and hung tasks (dmesg "
                      "| grep -i -e 'I/O error' -e 'blocked for more than'), at the drive (iostat "
                      "-x 1, smartctl -a, nvme smart-log) or the mount (a stale NFS or Lustre "
                      "client), and keep the node out of jobs until a write there ends in time",
                      drive, n->host)));
    }
  }
  return out;
}

std::vector<Finding> CheckSwap(const std::vector<NodeFacts>& nodes) {
  std::vector<std::string> hosts;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->health.swap_kib > 0) hosts.push_back(n->host);
  }
  if (hosts.empty()) return {};
  return {Make(Severity::kWarning, "swap", "", hosts,
               fmt::format("swap is on on {}: a rank that is paged out stalls every other rank at "
                           "the next collective, long enough for NCCL's watchdog to end the job",
                           NodesWord(hosts)),
               "swapoff -a (and remove it from /etc/fstab), as Kubernetes and most HPC sites run "
               "GPU nodes")};
}

std::vector<Finding> CheckMemory(const std::vector<NodeFacts>& nodes) {
  const NodeFacts* most = nullptr;
  for (const NodeFacts* n : Reached(nodes)) {
    if (!most || n->mem_kib > most->mem_kib) most = n;
  }
  if (!most || most->mem_kib <= 0) return {};
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->mem_kib <= 0 || n->mem_kib >= most->mem_kib * (1 - kMemoryShortfall)) continue;
    const double short_pct = 100.0 * (1 - static_cast<double>(n->mem_kib) / most->mem_kib);
    out.push_back(
        Make(Severity::kWarning, "memory", "mem", {n->host},
             fmt::format("node {}: {} of memory, {:.0f}% less than node {} ({})", n->host,
                         KibSize(n->mem_kib), short_pct, most->host, KibSize(most->mem_kib)),
             "if the nodes were bought alike, a memory module failed or was disabled at "
             "boot (dmidecode -t memory or the BMC's event log names the slot); ranks "
             "sized for the other nodes can be ended by the OOM killer there"));
  }
  return out;
}

std::vector<Finding> CheckClocksource(const std::vector<NodeFacts>& nodes) {
  std::map<std::string, std::vector<std::string>> by_source;
  for (const NodeFacts* n : Reached(nodes)) {
    const NodeHealth& h = n->health;
    const bool slow = h.clocksource == "hpet" || h.clocksource == "acpi_pm";
    const bool tsc = (" " + h.clocksources_available + " ").find(" tsc ") != std::string::npos;
    if (slow && tsc) by_source[h.clocksource].push_back(n->host);
  }
  std::vector<Finding> out;
  for (const auto& [source, hosts] : by_source) {
    out.push_back(Make(
        Severity::kWarning, "clocksource", "", hosts,
        fmt::format("{} {} the {} clock source though tsc is available: every clock read then "
                    "costs microseconds instead of nanoseconds (timers, profilers, NCCL)",
                    NodesWord(hosts), hosts.size() == 1 ? "uses" : "use", source),
        "echo tsc | sudo tee /sys/devices/system/clocksource/clocksource0/current_clocksource, "
        "and see why the kernel left tsc (dmesg | grep -i clocksource)"));
  }
  return out;
}

}  // namespace dtrain
