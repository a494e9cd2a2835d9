// A PCI tree under a sysfs stand-in (the folder the probe reads as /sys, DTRAIN_PROBE_SYSFS), for
// the doctor's pci-acs and iommu checks: each device a folder under devices/pci0000:00/ nested
// as its bridges are, with the files the probe reads there (vendor, class, config, iommu_group/
// type), its bus/pci/devices/ link, and for a NIC its class/infiniband/<name>/device link. Each
// configuration space is 4096 bytes laid out as the PCIe specification lays it out (a PCI
// Express capability, then extended capabilities chained from offset 256), so that lspci decodes
// the same bytes from a dump in its `-xxxx` format (LspciDump).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::test {

// One extended capability: its ID (0x0001 AER, 0x000d ACS, 0x0019 Secondary PCIe, ...) and, for
// ACS, its control register.
struct ExtendedCapability {
  ExtendedCapability(int id, int acs_control = 0) : id(id), acs_control(acs_control) {}
  int id;
  int acs_control;
};

struct PciFunction {
  std::vector<std::string> path;  // addresses from the root port down to this device
  int vendor = 0;                 // 0x10de NVIDIA, 0x15b3 Mellanox, 0x10b5 PLX/Broadcom
  int class_code = 0;             // 0x060400 PCI bridge, 0x030200 3D controller, 0x020700 IB
  int port_type = 0;              // PCIe capability: 0 endpoint, 4 root port, 5/6 switch up/down
  std::vector<ExtendedCapability> extended;
  std::string iommu_type;         // "" for no iommu_group
  std::string nic_name;           // "mlx5_0": listed under class/infiniband
  bool extended_readable = true;  // false: only the first 64 bytes, as a user other than root reads
};

inline PciFunction Pci(std::vector<std::string> path, int vendor, int class_code, int port_type,
                       std::vector<ExtendedCapability> extended, std::string iommu_type = "",
                       std::string nic_name = "", bool extended_readable = true) {
  PciFunction f;
  f.path = std::move(path);
  f.vendor = vendor;
  f.class_code = class_code;
  f.port_type = port_type;
  f.extended = std::move(extended);
  f.iommu_type = std::move(iommu_type);
  f.nic_name = std::move(nic_name);
  f.extended_readable = extended_readable;
  return f;
}

inline void PutLe(std::vector<uint8_t>& bytes, size_t at, uint32_t value, int size) {
  for (int i = 0; i < size; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

// The 4096 bytes of `f`'s configuration space; extended capabilities 0x48 bytes apart from 0x100.
inline std::vector<uint8_t> ConfigSpace(const PciFunction& f) {
  std::vector<uint8_t> c(4096, 0);
  PutLe(c, 0x00, f.vendor, 2);
  PutLe(c, 0x02, 0x1234, 2);
  PutLe(c, 0x06, 0x0010, 2);  // status: a capability list
  PutLe(c, 0x08, static_cast<uint32_t>(f.class_code) << 8, 4);
  c[0x0e] = (f.class_code >> 8) == 0x0604 ? 1 : 0;  // header type 1 for a bridge
  c[0x34] = 0x40;
  PutLe(c, 0x40, 0x0010, 2);                       // PCI Express capability, last in the list
  PutLe(c, 0x42, 0x0002 | (f.port_type << 4), 2);  // version 2, device/port type
  size_t at = 0x100;
  for (size_t i = 0; i < f.extended.size(); ++i) {
    const size_t next = i + 1 < f.extended.size() ? at + 0x48 : 0;
    PutLe(c, at, f.extended[i].id | (1u << 16) | (static_cast<uint32_t>(next) << 20), 4);
    if (f.extended[i].id == 0x000d) {
      PutLe(c, at + 4, 0x005f, 2);  // ACS capability: every control lspci names but EgressCtrl
      PutLe(c, at + 6, f.extended[i].acs_control, 2);
    }
    at = next;
  }
  return c;
}

// Writes `f` under `sys` (the stand-in's root).
inline void WritePciFunction(const std::string& sys, const PciFunction& f) {
  namespace fs = std::filesystem;
  std::string dir = sys + "/devices/pci0000:00";
  for (const std::string& a : f.path) dir += "/" + a;
  fs::create_directories(dir);
  const std::vector<uint8_t> config = ConfigSpace(f);
  std::ofstream(dir + "/config", std::ios::binary)
      .write(reinterpret_cast<const char*>(config.data()), f.extended_readable ? 4096 : 64);
  char text[16];
  std::snprintf(text, sizeof text, "0x%04x\n", f.vendor);
  std::ofstream(dir + "/vendor") << text;
  std::snprintf(text, sizeof text, "0x%06x\n", f.class_code);
  std::ofstream(dir + "/class") << text;
  if (!f.iommu_type.empty()) {
    fs::create_directories(dir + "/iommu_group");
    std::ofstream(dir + "/iommu_group/type") << f.iommu_type << "\n";
  }
  fs::create_directories(sys + "/bus/pci/devices");
  const std::string link = sys + "/bus/pci/devices/" + f.path.back();
  fs::remove(link);
  fs::create_symlink(fs::relative(dir, sys + "/bus/pci/devices"), link);
  if (!f.nic_name.empty()) {
    const std::string nic = sys + "/class/infiniband/" + f.nic_name;
    fs::create_directories(nic);
    fs::remove(nic + "/device");
    fs::create_symlink(fs::relative(dir, nic), nic + "/device");
  }
}

// `functions` as `lspci -xxxx` prints them, which `lspci -F FILE` reads back.
inline std::string LspciDump(const std::vector<PciFunction>& functions) {
  std::string out;
  for (const PciFunction& f : functions) {
    out += f.path.back() + " device\n";
    const std::vector<uint8_t> c = ConfigSpace(f);
    for (size_t at = 0; at < c.size(); at += 16) {
      char line[80];
      int n = std::snprintf(line, sizeof line, "%03zx:", at);
      for (size_t i = 0; i < 16; ++i)
        n += std::snprintf(line + n, sizeof line - n, " %02x", c[at + i]);
      out += std::string(line) + "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace dtrain::test
