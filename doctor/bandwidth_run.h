// `dtrain doctor --bandwidth`: runs `dtrain-clip bandwidth` on every node as a job of its own
// (dtrain launch's rank environment, transport and logs; one rank per node, or one per listed GPU
// where nodes list `gpus`), reads the figures from the rank logs and judges them
// (bandwidth_verdict.h). A node where the test cannot start is an error that says why. Each
// node's link error counters are read just before and after the test, which loads its links: a
// link whose errors grew meanwhile is a warning (link_errors.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "doctor/bandwidth_verdict.h"
#include "launcher/cluster_choice.h"

namespace dtrain {

struct BandwidthOptions {
  ClusterChoice cluster;  // as for dtrain launch (-c, or ./cluster.yaml, or this machine)
  int size_mib = 8;
  int iterations = 5;
  std::string log_dir;  // where the test's job folder goes; "" = a temporary folder
  // Asked while the link counters are read; the test job itself stops on dtrain launch's own
  // interrupt handling (Ctrl-C).
  std::function<bool()> cancelled;
};

struct BandwidthResult {
  int launch_status = 0;           // dtrain launch's exit status for the test job
  std::string job_dir;             // the test job's folder (kept when something failed)
  std::vector<std::string> hosts;  // node index -> name
  std::vector<BandwidthFigure> figures;
  BandwidthVerdict verdict;  // verdict.findings include a failed start
};

// `probed`: the cluster as the doctor probed it; nodes that list `gpus` get one rank per slot
// (the intra-node figure), others one rank.
BandwidthResult RunBandwidthTest(const ClusterSpec& probed, const BandwidthOptions& options);

// `dtrain doctor --json`'s document with a "bandwidth" member added: the figures by node name,
// the reference, the slow nodes and links, and the test job's status.
std::string AddBandwidthJson(const std::string& report_json, const BandwidthResult& result);

}  // namespace dtrain
