// A `dtrain doctor` run cut short by Ctrl-C (SIGINT, or SIGTERM, SIGHUP): what it says in place
// of a verdict. What had ended is reported as usual; a node or test that had not is neither good
// nor bad, so it is named as not judged (a warning) and the run writes no hostfile and drains no
// node. Its exit status is 128 + the signal.
#pragma once

#include <string>

#include "doctor/checks.h"

namespace dtrain {

// The warning that takes a cut-short test's findings' place: `test` is "bandwidth" or
// "compute"; `job_dir` the test job's folder, where each rank's output is kept ("" if none).
Finding CutShortTestFinding(const std::string& test, const std::string& job_dir);

// `dtrain doctor --json`'s document with "interrupted": {"signal": "SIGINT", "during": ...}.
std::string AddCutShortJson(const std::string& report_json, int signal, const std::string& during);

// The line the doctor ends with: "interrupted by SIGINT during the probes after 2.1 s; ...",
// naming the hostfile not written (`hostfile`, "" without --exclude-bad) and the drain not done.
std::string DescribeCutShort(int signal, const std::string& during, double seconds,
                             const std::string& hostfile, bool drain);

}  // namespace dtrain
