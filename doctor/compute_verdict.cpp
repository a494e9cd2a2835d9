#include "doctor/compute_verdict.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/doctor_job.h"

namespace dtrain {

using checks::Join;
using checks::Make;

RankComputeCheck ParseComputeCheckLog(std::string_view log) {
  RankComputeCheck out;
  std::string other;  // the lines that are none of the above, for WhyRankFailed
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string line(log.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line.rfind("frame #", 0) == 0) continue;
    if (line.rfind("dtrain-clip check on ", 0) == 0) {
      out.device = line.substr(21);
      // "cuda:0 (NVIDIA H100 80GB HBM3)": the device's model beside it.
      if (const size_t open = out.device.find(" (");
          open != std::string::npos && out.device.back() == ')') {
        out.model = out.device.substr(open + 2, out.device.size() - open - 3);
        out.device.resize(open);
      }
    } else if (line.rfind("PASS  ", 0) == 0 || line.rfind("FAIL  ", 0) == 0) {
      DeviceCheckLine check;
      check.passed = line[0] == 'P';
      const size_t name_at = line.find_first_not_of(' ', 6);
      const size_t name_end = std::min(line.find(' ', name_at), line.size());
      check.name = line.substr(name_at, name_end - name_at);
      const size_t detail_at = line.find_first_not_of(' ', name_end);
      check.detail = detail_at == std::string::npos ? "" : line.substr(detail_at);
      out.checks.push_back(std::move(check));
    } else if (line.rfind("SPEED  ", 0) == 0) {
      // SPEED  matmul          12.5 GFLOP/s (float32 1024 x 1024, fastest of 5 runs 171.2 ms)
      DeviceSpeedLine speed;
      char name[64] = "", unit[32] = "";
      int used = 0;
      if (std::sscanf(line.c_str() + 7, "%63s %lf %31s %n", name, &speed.value, unit, &used) >= 3 &&
          speed.value > 0) {
        speed.name = name;
        speed.unit = unit;
        std::string detail = line.substr(std::min(line.size(), 7 + static_cast<size_t>(used)));
        if (detail.size() >= 2 && detail.front() == '(' && detail.back() == ')') {
          detail = detail.substr(1, detail.size() - 2);
        }
        speed.detail = detail;
        out.speeds.push_back(std::move(speed));
      } else {
        other += line + "\n";
      }
    } else if (line.rfind(kCheckExitMarker, 0) == 0) {
      out.exit_status = std::atoi(line.c_str() + std::char_traits<char>::length(kCheckExitMarker));
    } else {
      other += line + "\n";
    }
  }
  out.last_words = WhyRankFailed(other);
  return out;
}

namespace {

std::string Where(const RankComputeCheck& r) {
  return r.device.empty() ? fmt::format("node {} (rank {})", r.node, r.rank)
                          : fmt::format("node {} ({}, rank {})", r.node, r.device, r.rank);
}

// The devices' speeds compared, per kind of device ("cpu", "cuda", and a CUDA device's model
// where known): `passed` are the ranks whose checks all passed.
void JudgeSpeeds(const std::vector<const RankComputeCheck*>& passed,
                 std::vector<Finding>& findings) {
  std::map<std::pair<std::string, std::string>, std::vector<const RankComputeCheck*>> by_kind;
  for (const RankComputeCheck* r : passed) {
    if (r->speeds.empty()) continue;
    const std::string kind = r->device.substr(0, r->device.find(':'));
    by_kind[{kind, kind == "cuda" ? r->model : ""}].push_back(r);
  }
  for (const auto& [kind_and_model, ranks] : by_kind) {
    const auto& [kind, model] = kind_and_model;
    const double slow_share = kind == "cpu" ? kSlowShareCpu : kSlowShare;
    const std::string devices = model.empty() ? kind : fmt::format("{} ({})", kind, model);
    // Per figure, in the order the check prints them: every rank's value, and the reference.
    std::vector<std::string> names;
    std::map<std::string, std::vector<double>> values;
    std::map<std::string, std::string> units;
    for (const RankComputeCheck* r : ranks) {
      for (const DeviceSpeedLine& s : r->speeds) {
        if (!values.count(s.name)) names.push_back(s.name);
        values[s.name].push_back(s.value);
        units[s.name] = s.unit;
      }
    }
    std::map<std::string, double> reference;
    for (auto& [name, v] : values) {
      std::sort(v.begin(), v.end());
      reference[name] = v[v.size() / 2];  // the middle one; of an even number the faster
    }
    bool any_slow = false;
    if (ranks.size() >= 2) {
      for (const RankComputeCheck* r : ranks) {
        std::vector<std::string> slow;
        for (const DeviceSpeedLine& s : r->speeds) {
          const double ref = reference[s.name];
          if (values[s.name].size() < 2 || s.value >= slow_share * ref) continue;
          // A CPU device's copy is the host's memory bandwidth, shared with every process of the
          // node (the other ranks copying at the same time): too varied to tell a node by.
          if (kind == "cpu" && s.name != "matmul") continue;
          slow.push_back(fmt::format("{} {:.4g} {}, {:.0f}% of its peers' {:.4g} ({})", s.name,
                                     s.value, s.unit, 100 * s.value / ref, ref, s.detail));
        }
        if (slow.empty()) continue;
        any_slow = true;
        findings.push_back(Make(
            Severity::kError, "compute", "", {r->node},
            fmt::format("{} is slow: {}", Where(*r), Join(slow, "; ")),
            "every synchronous step waits for the slowest GPU: look at its clocks and clock-event "
            "reasons, temperature and power cap (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE; "
            "`dtrain doctor` reads them) and, for host-to-device, its PCIe link; keep the node out "
            "of jobs (--exclude-bad -o FILE) until it is as fast as its peers"));
      }
    }
    if (any_slow) continue;
    std::vector<std::string> ranges;
    for (const std::string& name : names) {
      const std::vector<double>& v = values[name];
      ranges.push_back(
          v.front() == v.back()
              ? fmt::format("{} {:.4g} {}", name, v.front(), units[name])
              : fmt::format("{} {:.4g}-{:.4g} {}", name, v.front(), v.back(), units[name]));
    }
    findings.push_back(
        Make(Severity::kOk, "compute", "", {},
             ranks.size() < 2
                 ? fmt::format("one {} device, its speed compared with no other: {}", devices,
                               Join(ranges, ", "))
                 : fmt::format("the {} {} devices are alike in speed (none below {:.0f}% of the "
                               "middle one): {}",
                               ranks.size(), devices, 100 * slow_share, Join(ranges, ", "))));
  }
}

}  // namespace

bool RankPassed(const RankComputeCheck& r) {
  return r.exit_status == 0 && !r.checks.empty() &&
         std::all_of(r.checks.begin(), r.checks.end(),
                     [](const DeviceCheckLine& c) { return c.passed; });
}

std::vector<Finding> JudgeComputeChecks(const std::vector<RankComputeCheck>& ranks,
                                        double timeout_s, const std::string& job_dir) {
  std::vector<Finding> findings;
  std::set<std::string> nodes;
  for (const RankComputeCheck& r : ranks) nodes.insert(r.node);
  // A check that every rank fails (two or more): a cause they share (LibTorch, CUDA, the driver,
  // the check itself) is likelier than that many faulty GPUs, so no node is named for it.
  std::map<std::string, size_t> failing;  // check -> ranks failing it
  for (const RankComputeCheck& r : ranks) {
    for (const DeviceCheckLine& c : r.checks) failing[c.name] += c.passed ? 0 : 1;
  }
  std::set<std::string> shared;
  for (const DeviceCheckLine& c :
       ranks.empty() ? std::vector<DeviceCheckLine>{} : ranks[0].checks) {
    if (ranks.size() < 2 || failing[c.name] != ranks.size()) continue;
    shared.insert(c.name);
    findings.push_back(Make(
        Severity::kError, "compute", "", {},
        fmt::format("every device fails {} ({} rank(s) on {} node(s)), e.g. {}: {}: a cause they "
                    "share is likelier than {} faulty GPUs",
                    c.name, ranks.size(), nodes.size(), Where(ranks[0]), c.detail, ranks.size()),
        "compare the LibTorch, CUDA and driver versions above with a machine where dtrain-clip "
        "check passes; no node is left out for this"));
  }
  std::set<std::string> devices;
  std::vector<const RankComputeCheck*> passing;
  for (const RankComputeCheck& r : ranks) {
    std::vector<std::string> failed;
    bool failed_shared = false;
    for (const DeviceCheckLine& c : r.checks) {
      if (c.passed) continue;
      if (shared.count(c.name)) {
        failed_shared = true;
      } else {
        failed.push_back(c.name + ": " + c.detail);
      }
    }
    if (failed.empty() && failed_shared) continue;  // said once, above
    if (!failed.empty()) {
      findings.push_back(Make(
          Severity::kError, "compute", "", {r.node},
          fmt::format("{} computes wrong results: {}", Where(r), Join(failed, "; ")),
          "keep the node out of jobs (dtrain doctor --compute --exclude-bad -o FILE, then dtrain "
          "launch --hostfile FILE) and have its GPU tested (dcgmi diag -r 3) or replaced; a "
          "GPU that computes wrong numbers shows no error anywhere else"));
    } else if (r.exit_status == 124 || r.exit_status == 137) {
      findings.push_back(Make(
          Severity::kError, "compute", "", {r.node},
          fmt::format("the compute check did not finish within {:g} s on {}: the GPU may be hung",
                      timeout_s, Where(r)),
          "run nvidia-smi on the node; a GPU that does not answer needs a reset or a reboot; "
          "keep the node out of jobs until then"));
    } else if (RankPassed(r)) {
      passing.push_back(&r);
      devices.insert(r.device);
    } else {
      const std::string status =
          r.exit_status < 0 ? "no result" : fmt::format("status {}", r.exit_status);
      findings.push_back(Make(
          Severity::kError, "compute", "", {r.node},
          fmt::format("the compute check could not run on {} ({}){}", Where(r), status,
                      r.last_words.empty() ? "" : ": " + r.last_words),
          fmt::format("`dtrain doctor` (without --compute) says whether dtrain-clip runs there; "
                      "every rank's output is in {}",
                      job_dir)));
    }
  }
  if (!ranks.empty() && passing.size() == ranks.size()) {
    findings.push_back(Make(
        Severity::kOk, "compute", "", {},
        fmt::format("the training step's computations matched their references on every device: "
                    "{} rank(s) on {} node(s) ({})",
                    ranks.size(), nodes.size(),
                    Join(std::vector<std::string>(devices.begin(), devices.end())))));
  }
  JudgeSpeeds(passing, findings);
  return findings;
}

}  // namespace dtrain
