// Stand-ins that make a namespace node (tests/support/ssh_cluster.h) look like an 8-GPU HGX H100
// node to the doctor's probe: nvidia-smi, dmesg and systemctl first on the node's PATH (the
// node's `env:` in the cluster file), printing outputs built from the formats recorded on a real
// H100 (tests/support/nvidia_smi_fixture.h), and an InfiniBand sysfs tree under
// DTRAIN_PROBE_SYSFS. A test makes a node faulty by editing what its stand-ins print.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/nvidia_smi_fixture.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain::test {

inline void WriteExecutable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

// Stand-ins in `bin`: nvidia-smi printing these outputs (`nvlink -e`: every counter 0), dmesg
// printing `kernel`, and systemctl saying Fabric Manager is active. The outputs are files beside
// them (q.txt, nvlink-errors.txt, dmesg.txt, ...): a test may rewrite one while a job runs.
inline void WriteStandIns(const std::string& bin, const std::string& query,
                          const std::string& kernel) {
  std::filesystem::create_directories(bin);
  std::ofstream(bin + "/q.txt") << query;
  std::ofstream(bin + "/topo.txt") << HgxTopology();
  std::ofstream(bin + "/nvlink.txt") << NvlinkStatus();
  std::ofstream(bin + "/nvlink-errors.txt") << NvlinkErrors();
  std::ofstream(bin + "/list.csv") << GpuListCsv(8);
  std::ofstream(bin + "/dmesg.txt") << kernel;
  WriteExecutable(bin + "/nvidia-smi",
                  "#!/bin/sh\nd=$(dirname \"$0\")\ncase \"$1\" in\n"
                  "  -q) cat \"$d/q.txt\" ;;\n"
                  "  topo) cat \"$d/topo.txt\" ;;\n"
                  "  nvlink) if [ \"$2\" = -e ]; then cat \"$d/nvlink-errors.txt\"; else cat "
                  "\"$d/nvlink.txt\"; fi ;;\n"
                  "  *) cat \"$d/list.csv\" ;;\nesac\n");
  WriteExecutable(bin + "/dmesg", "#!/bin/sh\ncat \"$(dirname \"$0\")/dmesg.txt\"\n");
  WriteExecutable(bin + "/systemctl", "#!/bin/sh\necho active\n");
}

// /sys/class/infiniband/<device>/ports/1 under `root` with its error counters at 0, and
// /sys/module/nvidia_peermem.
inline void WriteInfiniband(const std::string& root, const std::string& device,
                            const std::string& state, const std::string& phys_state,
                            const std::string& rate) {
  const std::string port = root + "/class/infiniband/" + device + "/ports/1";
  std::filesystem::create_directories(port);
  std::ofstream(port + "/state") << state << "\n";
  std::ofstream(port + "/phys_state") << phys_state << "\n";
  std::ofstream(port + "/rate") << rate << "\n";
  std::ofstream(port + "/link_layer") << "InfiniBand\n";
  std::filesystem::create_directories(port + "/counters");
  for (const char* counter : {"symbol_error", "link_error_recovery", "link_downed",
                              "port_rcv_errors", "local_link_integrity_errors"}) {
    std::ofstream(port + "/counters/" + counter) << "0\n";
  }
  std::filesystem::create_directories(root + "/module/nvidia_peermem");
}

// NIC `device`'s PCIe error totals (AER) as the kernel shows them under `root`
// (class/infiniband/<device>/device/aer_dev_*, a folder here rather than the PCI device's link).
inline void WriteNicAer(const std::string& root, const std::string& device, long long correctable,
                        long long nonfatal, long long fatal) {
  const std::string dir = root + "/class/infiniband/" + device + "/device";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& file, const std::string& first, const std::string& total,
                   long long value) {
    std::ofstream(dir + "/" + file + ".new") << first << " 0\nTimeout 0\n"
                                             << total << " " << value << "\n";
    std::filesystem::rename(dir + "/" + file + ".new", dir + "/" + file);
  };
  write("aer_dev_correctable", "RxErr", "TOTAL_ERR_COR", correctable);
  write("aer_dev_nonfatal", "Undefined", "TOTAL_ERR_NONFATAL", nonfatal);
  write("aer_dev_fatal", "Undefined", "TOTAL_ERR_FATAL", fatal);
}

// The cluster file of `cluster` with each node's stand-in folder (<dir>/nodeI-bin) first on its
// PATH and its sysfs stand-in (<dir>/nodeI-sys), plus `extra` lines; written to <dir>/`name`.
inline std::string StandInClusterFile(const SshTestCluster& cluster, int nodes,
                                      const std::string& extra,
                                      const std::string& name = "health.yaml") {
  std::string text = ReadText(cluster.cluster_file());
  for (int i = 0; i < nodes; ++i) {
    const std::string host = "node" + std::to_string(i);
    const std::string line = "{host: " + host + ", address: " + cluster.Field(i, 1) + ", slots: 1}";
    const size_t at = text.find(line);
    if (at == std::string::npos) continue;
    const std::string dir = cluster.dir() + "/" + host;
    text.replace(at, line.size(),
                 "{host: " + host + ", address: " + cluster.Field(i, 1) +
                     ", slots: 1, env: {PATH: '" + dir + "-bin:/usr/local/sbin:/usr/local/bin:" +
                     "/usr/sbin:/usr/bin:/sbin:/bin', DTRAIN_PROBE_SYSFS: '" + dir + "-sys'}}");
  }
  const std::string file = cluster.dir() + "/" + name;
  std::ofstream(file) << text << extra;
  return file;
}

// The kernel log of a node just booted (the stand-in dmesg's text): no Xid. Writing it to a node's
// <cluster>/node<I>-bin/dmesg.txt "reboots" it.
inline const std::string kFreshBootLog = "[    1.0] Linux version 6.1\n";

// Each of the first `nodes` nodes of `cluster` made to look like an HGX H100 node (nvidia-smi,
// dmesg and systemctl stand-ins first on its PATH), node `xid_node` with an Xid 79 on GPU 3
// already in its kernel log; the cluster file that puts the stand-ins there.
inline std::string HgxNodes(const SshTestCluster& cluster, int nodes, int xid_node = -1) {
  for (int i = 0; i < nodes; ++i) {
    WriteStandIns(cluster.dir() + "/node" + std::to_string(i) + "-bin", HgxQuery(),
                  i == xid_node
                      ? kFreshBootLog +
                            "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, "
                            "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
                      : kFreshBootLog);
  }
  return StandInClusterFile(cluster, nodes, "");
}

}  // namespace dtrain::test
