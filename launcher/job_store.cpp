// The store is one short Python program, or dtrain-clip's `store` subcommand, started like a
// rank (same transport, node 0, the node's environment), that prints one line once it listens
// and then serves until SIGTERM.
#include "launcher/job_store.h"

#include <cctype>
#include <chrono>
#include <csignal>

#include <fmt/format.h>

namespace dtrain {
namespace {

constexpr const char* kReadyLine = "dtrain-job-store-ready";  // runtime/dist/job_store_server.h

// TCPStore's defaults are torch's own for the agent's store (libuv where this torch has it).
constexpr const char* kStoreScript = R"py(import sys, time
import torch.distributed as dist
store = dist.TCPStore(sys.argv[1], int(sys.argv[2]), is_master=True, wait_for_workers=False)
print("dtrain-job-store-ready", store.port, flush=True)
while True:
    time.sleep(3600)
)py";

bool IsPythonName(const std::string& program) {
  const std::string base = program.substr(program.rfind('/') + 1);
  if (base.rfind("python", 0) != 0) return false;
  for (char c : base.substr(6)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

}  // namespace

std::string JobPython(const std::vector<std::string>& command, const ClusterSpec& spec) {
  if (command.empty()) return "";
  if (IsPythonName(command.front())) return command.front();
  if (!spec.python.empty() && command.front() == spec.python) return spec.python;
  return "";
}

std::vector<std::string> JobStoreCommand(const std::vector<std::string>& command,
                                         const ClusterSpec& spec, const std::string& host,
                                         int port) {
  const std::string python = JobPython(command, spec);
  if (!python.empty()) return {python, "-c", kStoreScript, host, std::to_string(port)};
  if (!command.empty() && command.front().substr(command.front().rfind('/') + 1) == "dtrain-clip")
    return {command.front(), "store", "--host", host, "--port", std::to_string(port)};
  return {};
}

JobStore::JobStore(const ClusterSpec& spec, const std::vector<std::string>& command,
                   double timeout_s) {
  ProcessSpec proc;
  proc.id = 0;
  proc.node_index = 0;
  proc.beside_ranks = true;  // Slurm: a step with --overlap, so the ranks' step gets every CPU
  proc.argv = command;
  proc.env["PYTHONUNBUFFERED"] = "1";
  transport_ = MakeTransport(spec);
  transport_->Start({proc}, *this);
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!ready_ && !exited_ && Clock::now() < until) {
    if (!transport_->Poll(50, *this)) break;
  }
  if (ready_) return;
  if (why_.empty()) why_ = fmt::format("it did not listen within {:g} s", timeout_s);
  transport_->SignalAll(SIGKILL);
  while (transport_->Poll(100, *this)) {
  }
  transport_.reset();
}

JobStore::~JobStore() {
  if (!transport_) return;
  transport_->SignalAll(SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool killed = false;
  while (transport_->Poll(50, *this)) {
    if (!killed && std::chrono::steady_clock::now() > until) {
      transport_->SignalAll(SIGKILL);
      killed = true;
    }
  }
}

void JobStore::OnOutput(int, OutputStream, std::string_view bytes) {
  if (output_.size() < 64 * 1024) output_.append(bytes);
  if (output_.find(kReadyLine) != std::string::npos) ready_ = true;
}

void JobStore::OnExit(int, const ExitStatus& status) {
  exited_ = true;
  if (ready_) return;
  // The last line it printed says why (ModuleNotFoundError: No module named 'torch', ...).
  std::string last = output_;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') + 1);
  why_ = fmt::format("it ended before listening ({}){}{}", status.Describe(),
                     last.empty() ? "" : ": ", last);
}

}  // namespace dtrain
