// The doctor's fast health checks, run by `dtrain launch` on the first attempt's nodes before it
// starts the job, on a failed attempt's nodes before it restarts it (nvidia-resiliency-ext's
// health check before restart) and by the health watch while it runs: one probe per node with
// only its health parts (nvidia-smi's GPU states, NVLink, the kernel log's Xid errors, InfiniBand
// ports, free space, the interfaces the job's NCCL and Gloo variables name; no Python, torch or
// rendezvous test) and the cluster file's health checks that make a node unfit, judged by the
// doctor's health rules, then the doctor's peer test (peer_run.h) over the nodes probed. A node
// with an error finding (one cut off from the others among them), or one that cannot be probed,
// is unfit to run an attempt. Given a LinkErrorWatch, each node's link error counters are judged
// against its last reading, and a link whose errors grow is a warning. A node marked
// NodeSpec::witness is probed and takes part in the peer test, and is never named unfit.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "doctor/checks.h"
#include "doctor/link_errors.h"
#include "doctor/peer_plan.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_spec.h"
#include "launcher/health_watch.h"

namespace dtrain {

// The whole check's limit: nvidia-smi's own (DTRAIN_PROBE_SMI_TIMEOUT, default 10 s) and room.
constexpr double kFastHealthCheckTimeoutS = 20;

// Probes every node of `spec` (already placed: Slurm nodes are those of the allocation) through
// the cluster's transport, at most `timeout_s`; returns the unfit nodes: host -> why (the error
// findings naming it, "; "-joined), and the nodes' new link-errors warnings when `links` is
// given. A node that cannot be probed is unfit when `count_unreached`, else left out (while a
// job runs, the node timeout judges reachability). `cancelled` (optional) is asked while the
// probes run: true ends the check at once with what is known. `peer_plan`: the pairs the peer
// test connects (peer_plan.h; by default every pair). Throws dtrain::Error only when the
// transport cannot be built.
NodeHealthFindings FastHealthCheck(const ClusterSpec& spec, double timeout_s,
                                   bool count_unreached = true,
                                   const std::function<bool()>& cancelled = nullptr,
                                   LinkErrorWatch* links = nullptr, const PeerPlan& peer_plan = {});

// The launch's warnings of the doctor's CheckWriteHangs (host -> what). A write that hung on a
// node while other nodes' ended in time, the doctor's error, is a warning held against that node:
// a node's write also waits behind a burst of the job's own (rank 0's checkpoint, or what a killed
// rank left the kernel to write), so it stops no job, but after a failed attempt it makes the node
// the likeliest cause (node_health_checks.h). One that hung wherever it was tried (shared storage
// swamped or hanging) is said, held against no node (host "").
std::multimap<std::string, std::string> WriteHangWarnings(const std::vector<NodeFacts>& nodes);

// The findings of the rules about each node's own fitness on `run` (a probe of at least the health
// parts, its peer test run): GPUs, NVLink, the kernel log, Infiniband, free space, the job's
// interfaces, the cluster file's health checks of severity error, the peer test, and, when
// `count_unreached`, the nodes not reached. Their errors make a node unfit for the launch; the
// doctor's rules that compare nodes or versions are not among them.
std::vector<Finding> NodeFitnessFindings(const ClusterSpec& spec, const ProbeRun& run,
                                         bool count_unreached);

// The probe FastHealthCheck judges: every node of `spec` with only the health parts, at most
// `timeout_s`. Throws dtrain::Error only when the transport cannot be built.
ProbeRun ProbeHealthParts(const ClusterSpec& spec, double timeout_s,
                          const std::function<bool()>& cancelled = nullptr);

}  // namespace dtrain
