// JobStore: the job's TCPStore, hosted by dtrain as torchrun's agent hosts it
// (TORCHELASTIC_USE_AGENT_STORE=True), so every rank is only a client and no rank's exit tears
// the store down under the others (a rank that ends first no longer takes the store from ranks
// still using it). It runs the job's own torch, so it speaks exactly the ranks' protocol: for a
// Python job `python -c` creating TCPStore(is_master=True) on MASTER_PORT, for a dtrain-clip job
// `dtrain-clip store` (LibTorch's server), started through the job's transport on node 0 like a
// rank, and it ends after the attempt's last rank.
// One store per attempt: torch's client (rendezvous.py, _create_c10d_store) adds no per-attempt
// prefix, so a fresh store is what keeps one attempt's keys from the next.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/transport.h"

namespace dtrain {

// The Python that runs the job, when the job is a Python program: the program that runs is
// python* (python, python3, /venv/bin/python3.11) or the cluster file's `python:`. It is seen
// through what users put in front of it: variable assignments and `env` (`env A=1 python3 ...`),
// runners that take a program (nice, ionice, numactl, taskset, chrt, stdbuf, timeout, nohup,
// setsid, time, `uv run`, `conda run`, `pixi run`: the first python* word after them), and a
// shell's `-c` script (`sh -c 'cd /w && exec python train.py'`: the first python* word in
// command position). "" otherwise (`bash run.sh`, a program of another name): the job keeps rank
// 0 as the store's host.
std::string JobPython(const std::vector<std::string>& command, const ClusterSpec& spec);

// The command that serves the job's store at `host`:`port` on node 0: the job's Python
// (JobPython) running torch's TCPStore, or, when the command's program is dtrain-clip (by name
// or path), that same program's `store` subcommand. Empty when the job is neither: rank 0 hosts.
std::vector<std::string> JobStoreCommand(const std::vector<std::string>& command,
                                         const ClusterSpec& spec, const std::string& host,
                                         int port);

// How long the store may take to say it can serve.
constexpr double kStoreStartTimeoutS = 60;

class JobStore : private TransportEvents {
 public:
  // Starts `command` (JobStoreCommand) on `spec`'s node 0 (on Slurm, a step with --overlap
  // beside the ranks' step) and waits (up to `timeout_s`) until it can serve: a Python store as
  // soon as its Python has found torch (it then imports torch and listens while the ranks
  // start and import theirs, whose clients retry until it listens), dtrain-clip's once it
  // listens. On failure (no torch there) nothing is left running and why() says what happened.
  // `node_timeout_s` (ssh and Slurm): its node, silent this long, is lost (launcher/transport.h)
  // and nothing waits on it, as for the ranks.
  JobStore(const ClusterSpec& spec, const std::vector<std::string>& command,
           double timeout_s = kStoreStartTimeoutS, double node_timeout_s = 0);
  // Stops the store: SIGTERM, SIGKILL after 2 s.
  ~JobStore() override;
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  bool started() const { return started_; }
  bool listening() const { return listening_; }
  const std::string& why() const { return why_; }

  // Called while the ranks run: "" while the store is on its way or serving; else why it
  // failed (it ended, before or after it listened; it did not listen within `timeout_s` of its
  // start). Never waits.
  std::string Check();

 private:
  void OnOutput(int id, OutputStream stream, std::string_view bytes) override;
  void OnExit(int id, const ExitStatus& status) override;
  std::string LastLine() const;

  std::unique_ptr<Transport> transport_;
  std::string output_;
  bool started_ = false;    // it said it will listen (or listens)
  bool listening_ = false;  // it said it listens
  bool exited_ = false;
  std::string why_;
  double timeout_s_;
  std::chrono::steady_clock::time_point listen_by_;
  // Check() says nothing of a store whose node was lost until then (kLostStoreGrace).
  std::chrono::steady_clock::time_point lost_until_{};
};

// How long a store lost with its node is not reported: the ranks' node watch, polled as often,
// names the node within it.
constexpr std::chrono::seconds kLostStoreGrace{2};

}  // namespace dtrain
