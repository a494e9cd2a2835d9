// Xid lines -> XidEvent, and the Xid table: which codes mean a GPU is not fit to run a job.
#include "doctor/xid_events.h"

#include <cctype>
#include <cstdlib>

#include "doctor/nvidia_smi_report.h"
#include "doctor/tool_output_text.h"

namespace dtrain {
namespace {

struct XidRow {
  int code;
  XidClass cls;
  const char* meaning;
};

// The fatal set: codes NVIDIA's catalog resolves with a GPU reset, a reboot or service, as
// azurehpc-health-checks (azure_gpu_xid.nhc) and NVSentinel drain nodes for them; every code from
// 140 on (unrecovered ECC, GPU initialisation, NVLink and recovery-action events of Hopper and
// Blackwell) is fatal too. The application set: errors a faulty kernel or a killed process causes.
const XidRow kXids[] = {
    {13, XidClass::kApplication, "graphics engine exception (often an out-of-range access)"},
    {31, XidClass::kApplication, "GPU memory page fault (an illegal address in a kernel)"},
    {43, XidClass::kApplication, "GPU stopped processing (a channel was reset)"},
    {45, XidClass::kApplication, "preemptive cleanup (a process on the GPU was killed)"},
    {48, XidClass::kFatal, "double-bit ECC error"},
    {56, XidClass::kOther, "display engine error"},
    {57, XidClass::kOther, "error programming the video memory interface"},
    {58, XidClass::kOther, "unstable video memory interface"},
    {62, XidClass::kFatal, "internal micro-controller halt"},
    {63, XidClass::kOther, "ECC page retirement or row remapping recorded"},
    {64, XidClass::kFatal, "ECC page retirement or row remapping failed to record"},
    {68, XidClass::kApplication, "video decoder exception"},
    {69, XidClass::kOther, "graphics engine class error"},
    {74, XidClass::kFatal, "NVLink error"},
    {79, XidClass::kFatal, "GPU has fallen off the bus"},
    {92, XidClass::kFatal, "high single-bit ECC error rate"},
    {94, XidClass::kFatal, "contained ECC error"},
    {95, XidClass::kFatal, "uncontained ECC error"},
    {109, XidClass::kFatal, "context switch timeout"},
    {119, XidClass::kFatal, "GSP RPC timeout"},
    {120, XidClass::kFatal, "GSP error"},
    {121, XidClass::kOther, "C2C link error"},
    {140, XidClass::kFatal, "unrecovered ECC error"},
    {143, XidClass::kFatal, "GPU initialisation failure"},
    {154, XidClass::kFatal, "GPU recovery action changed"},
};

const XidRow* Row(int code) {
  for (const XidRow& row : kXids) {
    if (row.code == code) return &row;
  }
  return nullptr;
}

}  // namespace

XidClass ClassifyXid(int code) {
  if (const XidRow* row = Row(code)) return row->cls;
  return code >= 140 ? XidClass::kFatal : XidClass::kOther;
}

std::string XidMeaning(int code) {
  const XidRow* row = Row(code);
  return row ? row->meaning : "";
}

std::vector<XidEvent> ParseXidLines(const std::vector<std::string>& lines) {
  std::vector<XidEvent> out;
  for (const std::string& line : lines) {
    std::string_view rest = line;
    size_t at = rest.find("SXid (");
    const bool sxid = at != std::string_view::npos;
    if (!sxid) at = rest.find("Xid (");
    if (at == std::string_view::npos) continue;
    rest.remove_prefix(at + (sxid ? 6 : 5));
    const size_t close = rest.find("): ");
    if (close == std::string_view::npos) continue;
    XidEvent e;
    e.switch_xid = sxid;
    e.device = PciDeviceKey(rest.substr(0, close));
    rest.remove_prefix(close + 3);
    if (rest.empty() || !std::isdigit(static_cast<unsigned char>(rest.front()))) continue;
    e.code = std::atoi(std::string(rest.substr(0, rest.find(','))).c_str());
    const size_t comma = rest.find(',');
    e.text = comma == std::string_view::npos ? "" : std::string(TrimSpace(rest.substr(comma + 1)));
    e.fatal = sxid && e.text.rfind("Fatal", 0) == 0;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace dtrain
