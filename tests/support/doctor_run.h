// Test support: `dtrain doctor` run as a user runs it (the built binary, a real cluster file),
// its exit status, what it printed, and its --json document when it printed one.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain::test {

struct DoctorRun {
  int status = -1;
  std::string out;     // stdout: the report, or the JSON document
  std::string text;    // stdout, then stderr
  nlohmann::json doc;  // the parsed stdout (discarded when it is not JSON)
  double wall_s = 0;   // how long it ran
};

// `NO_COLOR=1 dtrain doctor ARGS -c FILE --timeout 20`.
inline DoctorRun RunDoctor(const std::string& args, const std::string& cluster_file) {
  DoctorRun r;
  const auto start = std::chrono::steady_clock::now();
  const std::string out_file = cluster_file + ".doctor-out";
  const std::string err =
      RunOutput("NO_COLOR=1 " + std::string(DTRAIN_BINARY_DIR) + "/dtrain doctor " + args + " -c " +
                cluster_file + " --timeout 20 2>&1 >" + out_file + "; echo \"rc=$?\"");
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t rc = err.rfind("rc=");
  r.status = std::stoi(err.substr(rc + 3));
  r.out = ReadText(out_file);
  r.text = r.out + err.substr(0, rc);
  r.doc = nlohmann::json::parse(r.out, nullptr, false);
  return r;
}

// The findings of `check` with `severity` ("ok", "warning", "error") in a --json run.
inline std::vector<nlohmann::json> Findings(const DoctorRun& r, const std::string& check,
                                            const std::string& severity) {
  std::vector<nlohmann::json> out;
  if (!r.doc.is_object()) return out;
  for (const auto& f : r.doc["findings"]) {
    if (f["check"] == check && f["severity"] == severity) out.push_back(f);
  }
  return out;
}

}  // namespace dtrain::test
