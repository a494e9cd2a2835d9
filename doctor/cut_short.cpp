#include "doctor/cut_short.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "doctor/check_support.h"
#include "launcher/exit_status.h"

namespace dtrain {

Finding CutShortTestFinding(const std::string& test, const std::string& job_dir) {
  std::string remedy = fmt::format("run `dtrain doctor --{}` again and let it end", test);
  if (!job_dir.empty()) remedy += "; what each rank printed is in " + job_dir;
  return checks::Make(Severity::kWarning, test, "", {},
                      fmt::format("--{} was cut short by the interrupt: no node's result was "
                                  "judged",
                                  test),
                      remedy);
}

std::string AddCutShortJson(const std::string& report_json, int signal, const std::string& during) {
  nlohmann::json report = nlohmann::json::parse(report_json);
  report["interrupted"] = {{"signal", SignalName(signal)}, {"during", during}};
  return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string DescribeCutShort(int signal, const std::string& during, double seconds,
                             const std::string& hostfile, bool drain) {
  std::string line = fmt::format(
      "interrupted by {} during {} after {:.1f} s; the report above judges only what had ended",
      SignalName(signal), during, seconds);
  std::vector<std::string> not_done;
  if (!hostfile.empty()) not_done.push_back(hostfile + " was not written");
  if (drain) not_done.push_back("no node was drained");
  if (!not_done.empty()) {
    line += fmt::format(
        "; {} (a node not judged is neither good nor bad: run the doctor again to the end)",
        checks::Join(not_done, " and "));
  }
  return line;
}

}  // namespace dtrain
