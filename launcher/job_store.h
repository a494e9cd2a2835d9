// JobStore: the job's TCPStore, hosted by dtrain as torchrun's agent hosts it
// (TORCHELASTIC_USE_AGENT_STORE=True), so every rank is only a client and no rank's exit tears
// the store down under the others (a rank without destroy_process_group that ends first no
// longer aborts the rest). It runs the job's own Python, so it speaks exactly the job's torch
// version's protocol: `python -c` creating TCPStore(is_master=True) on MASTER_PORT, started
// through the job's transport on node 0 like a rank, and it ends after the attempt's last rank.
// One store per attempt: torch's client (rendezvous.py, _create_c10d_store) adds no per-attempt
// prefix, so a fresh store is what keeps one attempt's keys from the next.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/transport.h"

namespace dtrain {

// The Python that runs the job, when the job is a Python program: the command's program when it
// is python* (python, python3, /venv/bin/python3.11), or the cluster file's `python:` when the
// command names that. "" otherwise: the job keeps rank 0 as the store's host.
std::string JobPython(const std::vector<std::string>& command, const ClusterSpec& spec);

class JobStore : private TransportEvents {
 public:
  // Starts the store on `spec`'s node 0 at `host`:`port` with `python` and waits (up to
  // `timeout_s`) for it to listen. On failure (no torch there, the port taken, a Slurm
  // cluster) nothing is left running and why() says what happened.
  JobStore(const ClusterSpec& spec, const std::string& python, const std::string& host, int port,
           double timeout_s = 60);
  // Stops the store: SIGTERM, SIGKILL after 2 s.
  ~JobStore() override;
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  bool ready() const { return ready_; }
  const std::string& why() const { return why_; }

 private:
  void OnOutput(int id, OutputStream stream, std::string_view bytes) override;
  void OnExit(int id, const ExitStatus& status) override;

  std::unique_ptr<Transport> transport_;
  std::string output_;
  bool ready_ = false;
  bool exited_ = false;
  std::string why_;
};

}  // namespace dtrain
