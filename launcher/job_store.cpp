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
constexpr const char* kStartingLine = "dtrain-job-store-starting";

// TCPStore's defaults are torch's own for the agent's store (libuv where this torch has it).
// It listens before anything else, on every address as TCPStore's server does, and says so:
// the ranks start then, and a rank that connects while this Python still imports torch
// (seconds) waits in the listen backlog, not in its client's growing retry delays. TCPStore
// takes the listening socket over (master_listen_fd; a torch without it gets a fresh one).
constexpr const char* kStoreScript = R"py(import sys, time, socket, importlib.util
if importlib.util.find_spec("torch") is None:
    sys.exit("ModuleNotFoundError: No module named 'torch'")
host, port = sys.argv[1], int(sys.argv[2])
dual = socket.has_dualstack_ipv6()
try:
    sock = socket.create_server(("", port), family=socket.AF_INET6 if dual else socket.AF_INET,
                                backlog=socket.SOMAXCONN, dualstack_ipv6=dual)
except OSError as e:
    sys.exit(f"OSError: port {port}: {e.strerror}")
print("dtrain-job-store-starting", flush=True)
import torch.distributed as dist
try:
    store = dist.TCPStore(host, port, is_master=True, wait_for_workers=False,
                          master_listen_fd=sock.fileno())
    sock.detach()
except TypeError:
    sock.close()
    store = dist.TCPStore(host, port, is_master=True, wait_for_workers=False)
print("dtrain-job-store-ready", store.port, flush=True)
while True:
    time.sleep(3600)
)py";

std::string BaseName(const std::string& program) {
  return program.substr(program.rfind('/') + 1);
}

bool IsPythonName(const std::string& program) {
  const std::string base = BaseName(program);
  if (base.rfind("python", 0) != 0) return false;
  for (char c : base.substr(6)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

bool IsAssignment(const std::string& word) {
  const size_t eq = word.find('=');
  if (eq == 0 || eq == std::string::npos) return false;
  for (size_t i = 0; i < eq; ++i) {
    const unsigned char c = static_cast<unsigned char>(word[i]);
    if (!std::isalnum(c) && c != '_') return false;
  }
  return !std::isdigit(static_cast<unsigned char>(word[0]));
}

// Programs that run the program named after their own options.
bool IsRunner(const std::string& program) {
  static const char* const kRunners[] = {
      "env",    "nice", "ionice", "numactl", "taskset", "chrt", "stdbuf",     "timeout", "nohup",
      "setsid", "time", "exec",   "uv",      "conda",   "pixi", "micromamba", "mamba"};
  const std::string base = BaseName(program);
  for (const char* runner : kRunners) {
    if (base == runner) return true;
  }
  return false;
}

bool IsShell(const std::string& program) {
  const std::string base = BaseName(program);
  return base == "sh" || base == "bash" || base == "dash" || base == "zsh" || base == "ksh";
}

// A shell script's words, split as the shell splits them for what is looked at here: quotes
// and backslashes, and the control operators ; & | && || ( ) and newlines as words of their own.
std::vector<std::string> ShellWords(const std::string& script) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  for (size_t i = 0; i < script.size(); ++i) {
    const char c = script[i];
    if (c == '\'' || c == '"') {
      const size_t close = script.find(c, i + 1);
      word += script.substr(i + 1, close == std::string::npos ? std::string::npos : close - i - 1);
      in_word = true;
      if (close == std::string::npos) break;
      i = close;
    } else if (c == '\\' && i + 1 < script.size()) {
      word += script[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      end_word();
    } else if (c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '\n') {
      end_word();
      words.push_back(std::string(1, c));
      if ((c == '&' || c == '|') && i + 1 < script.size() && script[i + 1] == c) ++i;
    } else {
      word += c;
      in_word = true;
    }
  }
  end_word();
  return words;
}

bool IsControlOperator(const std::string& word) {
  return word == ";" || word == "&" || word == "|" || word == "(" || word == ")" || word == "\n";
}

std::string PythonIn(const std::vector<std::string>& words, const ClusterSpec& spec);

// The Python of one simple command (words up to the next control operator): `words[at]` is its
// first word. Assignments are skipped; a runner hands over to the first python* word after it; a
// shell's -c script is read for its own.
std::string PythonOfCommand(const std::vector<std::string>& words, size_t at,
                            const ClusterSpec& spec) {
  while (at < words.size() && IsAssignment(words[at])) ++at;
  if (at >= words.size() || IsControlOperator(words[at])) return "";
  const std::string& program = words[at];
  if (IsPythonName(program)) return program;
  if (!spec.python.empty() && program == spec.python) return program;
  if (IsRunner(program)) {
    for (size_t i = at + 1; i < words.size() && !IsControlOperator(words[i]); ++i) {
      if (IsPythonName(words[i]) || (!spec.python.empty() && words[i] == spec.python))
        return words[i];
    }
    return "";
  }
  if (IsShell(program)) {
    // sh -c 'script' [name args...], also -ec, -lc, -xc and the like.
    for (size_t i = at + 1; i + 1 < words.size() && words[i].size() > 1 && words[i][0] == '-';
         ++i) {
      if (words[i].find('c') != std::string::npos && words[i].rfind("--", 0) != 0)
        return PythonIn(ShellWords(words[i + 1]), spec);
    }
  }
  return "";
}

// The first Python in command position in a list of commands (a shell script's words).
std::string PythonIn(const std::vector<std::string>& words, const ClusterSpec& spec) {
  bool command_start = true;
  for (size_t i = 0; i < words.size(); ++i) {
    if (IsControlOperator(words[i])) {
      command_start = true;
      continue;
    }
    if (!command_start) continue;
    command_start = false;
    std::string python = PythonOfCommand(words, i, spec);
    if (!python.empty()) return python;
  }
  return "";
}

}  // namespace

std::string JobPython(const std::vector<std::string>& command, const ClusterSpec& spec) {
  if (command.empty()) return "";
  return PythonOfCommand(command, 0, spec);
}

std::vector<std::string> JobStoreCommand(const std::vector<std::string>& command,
                                         const ClusterSpec& spec, const std::string& host,
                                         int port) {
  const std::string python = JobPython(command, spec);
  if (!python.empty()) return {python, "-c", kStoreScript, host, std::to_string(port)};
  if (!command.empty() && BaseName(command.front()) == "dtrain-clip")
    return {command.front(), "store", "--host", host, "--port", std::to_string(port)};
  return {};
}

JobStore::JobStore(const ClusterSpec& spec, const std::vector<std::string>& command,
                   double timeout_s, double node_timeout_s)
    : timeout_s_(timeout_s) {
  ProcessSpec proc;
  proc.id = 0;
  proc.node_index = 0;
  proc.beside_ranks = true;  // Slurm: a step with --overlap, so the ranks' step gets every CPU
  proc.argv = command;
  proc.env["PYTHONUNBUFFERED"] = "1";
  transport_ = MakeTransport(spec, kDefaultRemoteGraceS, node_timeout_s);
  transport_->Start({proc}, *this);
  listen_by_ = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(timeout_s));
  while (!started_ && !exited_ && std::chrono::steady_clock::now() < listen_by_) {
    if (!transport_->Poll(50, *this)) break;
  }
  if (started_) return;
  if (why_.empty()) why_ = fmt::format("it did not start within {:g} s", timeout_s);
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

std::string JobStore::Check() {
  if (!transport_) return why_;
  if (!exited_) transport_->Poll(0, *this);
  if (exited_) return std::chrono::steady_clock::now() < lost_until_ ? "" : why_;
  if (!listening_ && std::chrono::steady_clock::now() >= listen_by_)
    why_ = fmt::format("it did not listen within {:g} s of its start", timeout_s_);
  return why_;
}

void JobStore::OnOutput(int, OutputStream, std::string_view bytes) {
  if (output_.size() < 64 * 1024) output_.append(bytes);
  if (output_.find(kReadyLine) != std::string::npos) listening_ = true;
  if (listening_ || output_.find(kStartingLine) != std::string::npos) started_ = true;
}

std::string JobStore::LastLine() const {
  std::string last = output_;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  return last.substr(last.rfind('\n') + 1);
}

void JobStore::OnExit(int, const ExitStatus& status) {
  exited_ = true;
  // Its node was lost: the ranks' transport, with the same node timeout, names that node, which
  // a store failure (no node blamed) must not pre-empt.
  if (status.lost) lost_until_ = std::chrono::steady_clock::now() + kLostStoreGrace;
  // The last line it printed says why (ModuleNotFoundError: No module named 'torch', ...).
  std::string last = LastLine();
  if (last.rfind(kStartingLine, 0) == 0 || last.rfind(kReadyLine, 0) == 0) last.clear();
  why_ =
      fmt::format("it ended {} ({}){}{}", listening_ ? "while the ranks ran" : "before listening",
                  status.Describe(), last.empty() ? "" : ": ", last);
}

}  // namespace dtrain
