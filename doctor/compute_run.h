// `dtrain doctor --compute`: runs `dtrain-clip check` on every node as a job of its own
// (doctor_job.h: one rank per node, or one per listed GPU), each under `timeout`, reads each
// rank's lines and judges them (compute_verdict.h). Where the cluster file expects GPUs each rank
// checks its local rank's GPU (--device cuda: no visible GPU is an error, not a pass on the
// CPU); elsewhere --device auto.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "doctor/compute_verdict.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_choice.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

struct ComputeOptions {
  ClusterChoice cluster;   // as for dtrain launch (-c, or ./cluster.yaml, or this machine)
  double timeout_s = 300;  // one rank's whole check, CUDA's start included
  std::string log_dir;     // where the check's job folder goes; "" = a temporary folder
  // Each node's GPU model where the probe read one model for all its GPUs (GpuModels): CUDA
  // devices are compared in speed with those of the same model only.
  std::map<std::string, std::string> gpu_models;
};

// The GPU model of each node of `run` whose GPUs are all of one model.
std::map<std::string, std::string> GpuModels(const ProbeRun& run);

struct ComputeResult {
  int launch_status = 0;
  std::string job_dir;  // kept when something failed
  std::vector<RankComputeCheck> ranks;
  std::vector<Finding> findings;
};

ComputeResult RunComputeCheck(const ClusterSpec& probed, const ComputeOptions& options);

// `dtrain doctor --json`'s document with a "compute" member added: each rank's node, device,
// status and checks.
std::string AddComputeJson(const std::string& report_json, const ComputeResult& result);

}  // namespace dtrain
