// Xid and SXid lines of a node's kernel log (the NVIDIA driver's error reports, for GPUs and for
// NVSwitches), read into events, and what each Xid means and how bad it is, after NVIDIA's Xid
// catalog (docs.nvidia.com/deploy/xid-errors) and the lists of azurehpc-health-checks and
// NVSentinel.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// One line: "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, GPU has fallen off the bus." or
// "nvidia-nvswitch3: SXid (PCI:0000:c7:00.0): 24007, Fatal, Link 36 ...".
struct XidEvent {
  bool switch_xid = false;  // an SXid: an NVSwitch's, not a GPU's
  std::string device;       // PciDeviceKey of the address: "0000:00:06"
  int code = -1;
  std::string text;    // what follows the code: "pid=1234, GPU has fallen off the bus."
  bool fatal = false;  // SXid only: the driver wrote "Fatal"
};
// Empty when the line holds no Xid or SXid.
std::vector<XidEvent> ParseXidLines(const std::vector<std::string>& lines);

enum class XidClass {
  kFatal,        // the GPU needs a reset, a reboot or service before it runs a job again
  kApplication,  // usually the application's fault; clears with the process
  kOther,        // anything else: reported, to be looked up in the catalog
};
XidClass ClassifyXid(int code);
// "GPU has fallen off the bus"; "" for codes the table does not name.
std::string XidMeaning(int code);

}  // namespace dtrain
