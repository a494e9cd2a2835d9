// Transport for `transport: slurm`. Each Start() becomes one srun job step in the allocation the
// spec was placed on (launcher/slurm/slurm_allocation.h): the processes' node indices name the
// allocated nodes, and the placement names the job; the transport changes nothing it is given.
// With a node timeout, every task says it is alive every half second (slurm_step.h); a node none
// of whose running tasks was heard from for that long is lost, as an ssh node that falls silent
// (its processes end with ExitStatus::NodeLost), seconds before slurmctld would declare it DOWN.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/slurm/slurm_child.h"
#include "launcher/slurm/slurm_hostlist.h"
#include "launcher/slurm/slurm_step.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// The scancel processes of transports that went before they ended: reaped by the transports
// polled after them, killed only when dtrain exits.
std::mutex g_kept_mutex;
std::vector<Subprocess>& KeptCancels() {
  static std::vector<Subprocess> kept;
  return kept;
}

void KeepCancel(Subprocess cancel) {
  if (cancel.Done()) return;
  std::lock_guard<std::mutex> lock(g_kept_mutex);
  KeptCancels().push_back(std::move(cancel));
}

void ReapKeptCancels() {
  std::lock_guard<std::mutex> lock(g_kept_mutex);
  std::vector<Subprocess>& kept = KeptCancels();
  kept.erase(std::remove_if(kept.begin(), kept.end(), [](Subprocess& p) { return p.Done(); }),
             kept.end());
}

std::string RandomMarker() {
  std::random_device device;
  return fmt::format("@dtrain-slurm-{:08x}{:08x}@", device(), device());
}

// "Exited with exit code 3", "Killed", ... as srun reports a task that ended badly.
ExitStatus StatusFromSrunWords(const std::string& words) {
  ExitStatus status;
  const std::string exited = "Exited with exit code ";
  if (words.rfind(exited, 0) == 0) {
    status.code = std::atoi(words.c_str() + exited.size());
  } else if (words.rfind("Terminated", 0) == 0) {
    status.signal = SIGTERM;
  } else if (words.rfind("Interrupt", 0) == 0) {
    status.signal = SIGINT;
  } else {
    status.signal = SIGKILL;
  }
  return status;
}

// A labelled line on srun's stderr that only repeats what the exit status says: the wrapper
// shell naming the signal that killed the command ("0: Terminated"), or slurmstepd saying the
// step was cancelled on request (a time limit, "... DUE TO TIME LIMIT ***", is kept).
bool IsRoutineTaskMessage(const std::string& line) {
  const SlurmTaskLine task = ParseSlurmTaskLine(line, false, "");
  if (task.task < 0) return false;
  if (task.output.find("CANCELLED AT") != std::string::npos &&
      task.output.find("DUE TO") == std::string::npos) {
    return true;
  }
  for (int sig = 1; sig < 65; ++sig) {
    const char* words = strsignal(sig);
    if (words && task.output.rfind(words, 0) == 0) return true;
  }
  return false;
}

// A temporary SLURM_HOSTFILE (srun reads it on this machine when it starts the step).
std::string WriteHostfile(const std::string& text) {
  char path[] = "/tmp/dtrain-slurm-hosts-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw Error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  const ssize_t n = write(fd, text.data(), text.size());
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw Error(fmt::format("cannot write {}", path));
  return path;
}

// One srun step and what has been seen of it.
struct SlurmRun {
  std::vector<ProcessSpec> procs;  // until launched
  SlurmStepPlan plan;
  Subprocess child;  // srun
  bool launched = false;
  bool reaped = false;
  bool done = false;
  int srun_status = 0;
  std::string out_pending;  // a partial line of srun's stdout
  std::string err_pending;
  std::vector<std::string> srun_errors;  // lines srun wrote that are not task reports
  std::string step_id;                   // "JOB.STEP" once a task started
  bool terminated = false;               // srun was sent SIGTERM
  std::string hostfile;                  // SLURM_HOSTFILE for uneven steps; removed at the end
  std::vector<bool> started, exited;
  std::map<int, ExitStatus> srun_reported;  // task -> what srun said about it
  // The node watch (a node timeout was given): when each node (plan.hosts) was last heard from,
  // counted from the step's first task start, and which were lost.
  bool step_running = false;
  std::vector<Clock::time_point> node_heard;
  std::vector<std::time_t> node_heard_wall;
  std::vector<bool> node_lost;
  bool srun_killed = false;  // after a loss: srun would wait for the lost node's tasks
  // scancel runs on its own: slurmctld answers a signal for a step only once every node of it
  // did, so a node that does not answer would keep dtrain waiting for MessageTimeout (10 s).
  struct PendingCancel {
    int sig = 0;
    Subprocess scancel;  // once it ended, it leaves the list (a failure: srun is signalled)
  };
  std::vector<PendingCancel> cancels;
};

class SlurmTransport : public Transport {
 public:
  SlurmTransport(const ClusterSpec& spec, double node_timeout_s)
      : spec_(spec), node_timeout_s_(node_timeout_s) {}
  ~SlurmTransport() override;

  void Start(const std::vector<ProcessSpec>& procs, TransportEvents& events) override;
  bool Poll(int timeout_ms, TransportEvents& events) override;
  void SignalAll(int sig) override;

 private:
  void Launch(SlurmRun& run, TransportEvents& events);
  void Fail(SlurmRun& run, const std::string& why, TransportEvents& events);
  void ReadFrom(SlurmRun& run, int& fd, bool is_stdout, TransportEvents& events);
  void HandleLine(SlurmRun& run, std::string_view line, bool newline, TransportEvents& events);
  void HandleSrunLine(SlurmRun& run, const std::string& line);
  void Finish(SlurmRun& run, TransportEvents& events);
  // Asks scancel to signal (or, SIGKILL, cancel) the run's step, not waiting for it.
  void Cancel(SlurmRun& run, int sig);
  void SignalSrun(SlurmRun& run, int sig);
  void Heard(SlurmRun& run, int task);
  void WatchNodes(SlurmRun& run, TransportEvents& events);
  // The cluster file's name for the allocated node `machine`.
  std::string NodeLabel(const std::string& machine) const;

  ClusterSpec spec_;
  double node_timeout_s_ = 0;
  std::vector<std::unique_ptr<SlurmRun>> runs_;
};

SlurmTransport::~SlurmTransport() {
  for (auto& run : runs_) {
    if (run->launched && !run->reaped) {
      Cancel(*run, SIGKILL);
      // The step is cancelled and nothing reads srun any more: it is not waited for, since it
      // would wait KillWait (30 s by default) for a node that does not answer. Before the step
      // started, srun (told by Cancel) withdraws it itself and is waited for.
      if (!run->step_id.empty()) run->child.SignalGroup(SIGKILL);
      run->child.Finish();
    }
    // A scancel still on its way is neither killed (the step would stay, and the lost node's
    // ranks run on when it answers again) nor waited for (slurmctld may hold it up for
    // MessageTimeout): it is handed over (KeepCancel).
    for (SlurmRun::PendingCancel& cancel : run->cancels) KeepCancel(std::move(cancel.scancel));
  }
}

void SlurmTransport::Start(const std::vector<ProcessSpec>& procs, TransportEvents& events) {
  if (procs.empty()) return;
  runs_.push_back(std::make_unique<SlurmRun>());
  SlurmRun& run = *runs_.back();
  run.procs = procs;
  if (!spec_.slurm_placement.placed) {
    Fail(run, "transport slurm: the cluster was not placed on a Slurm allocation (PlaceOnSlurm)",
         events);
    return;
  }
  Launch(run, events);
}

void SlurmTransport::Launch(SlurmRun& run, TransportEvents& events) {
  try {
    run.plan = PlanSlurmStep(run.procs, spec_, RandomMarker(), node_timeout_s_ > 0);
    EnvOverrides env(run.plan.env.begin(), run.plan.env.end());
    if (run.plan.tasks_per_node == 0) {
      run.hostfile = WriteHostfile(SlurmHostfile(run.plan));
      env["SLURM_HOSTFILE"] = run.hostfile;
    }
    const SlurmPlacement& placement = spec_.slurm_placement;
    run.child = StartSlurmClient(SrunArgv(run.plan, placement.job_id, placement.job_name), env,
                                 !run.plan.stdin_data.empty());
  } catch (const Error& e) {
    Fail(run, e.what(), events);
    return;
  }
  run.launched = true;
  run.started.assign(run.plan.task_ids.size(), false);
  run.exited.assign(run.plan.task_ids.size(), false);
  run.node_heard.assign(run.plan.hosts.size(), Clock::now());
  run.node_heard_wall.assign(run.plan.hosts.size(), 0);
  run.node_lost.assign(run.plan.hosts.size(), false);
  if (run.child.in_fd >= 0) {
    const std::string& data = run.plan.stdin_data;
    for (size_t at = 0; at < data.size();) {
      const ssize_t n = write(run.child.in_fd, data.data() + at, data.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    Subprocess::Close(run.child.in_fd);
  }
  run.procs.clear();
}

void SlurmTransport::Fail(SlurmRun& run, const std::string& why, TransportEvents& events) {
  ExitStatus status;
  status.error = why;
  if (run.procs.empty()) {
    for (size_t t = 0; t < run.plan.task_ids.size(); ++t) {
      if (!run.exited[t]) events.OnExit(run.plan.task_ids[t], status);
    }
  } else {
    for (const ProcessSpec& p : run.procs) events.OnExit(p.id, status);
  }
  run.done = true;
}

bool SlurmTransport::Poll(int timeout_ms, TransportEvents& events) {
  std::vector<pollfd> fds;
  std::vector<std::pair<SlurmRun*, bool>> owners;
  for (auto& run : runs_) {
    if (!run->launched || run->done) continue;
    if (run->child.out_fd >= 0) {
      fds.push_back({run->child.out_fd, POLLIN, 0});
      owners.push_back({run.get(), true});
    }
    if (run->child.err_fd >= 0) {
      fds.push_back({run->child.err_fd, POLLIN, 0});
      owners.push_back({run.get(), false});
    }
  }
  bool busy = false;
  for (auto& run : runs_) busy = busy || !run->done;
  if (!busy) return false;
  if (poll(fds.data(), fds.size(), fds.empty() ? std::min(timeout_ms, 50) : timeout_ms) > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      SlurmRun& run = *owners[i].first;
      ReadFrom(run, owners[i].second ? run.child.out_fd : run.child.err_fd, owners[i].second,
               events);
    }
  }
  for (auto& run : runs_) {
    if (run->launched && !run->done) WatchNodes(*run, events);
    std::vector<SlurmRun::PendingCancel>& cancels = run->cancels;
    cancels.erase(std::remove_if(cancels.begin(), cancels.end(),
                                 [&](SlurmRun::PendingCancel& cancel) {
                                   if (!cancel.scancel.Done()) return false;
                                   if (!cancel.scancel.status().ok() && !run->reaped)
                                     SignalSrun(*run, cancel.sig);
                                   return true;
                                 }),
                  cancels.end());
  }
  ReapKeptCancels();
  for (auto& run : runs_) {
    if (!run->launched || run->done || run->child.out_fd >= 0 || run->child.err_fd >= 0) continue;
    run->srun_status = run->child.Finish().ShellStatus();  // 255 when it was lost
    run->reaped = true;
    if (!run->hostfile.empty()) unlink(run->hostfile.c_str());
    Finish(*run, events);
  }
  for (auto& run : runs_) {
    if (!run->done) return true;
  }
  return false;
}

void SlurmTransport::ReadFrom(SlurmRun& run, int& fd, bool is_stdout, TransportEvents& events) {
  char buffer[65536];
  const size_t n = Subprocess::Read(fd, buffer, sizeof buffer);
  std::string& pending = is_stdout ? run.out_pending : run.err_pending;
  if (n == 0 && fd >= 0) return;  // nothing to read after all
  if (n == 0) {
    if (!pending.empty()) {
      if (is_stdout) HandleLine(run, pending, false, events);
      if (!is_stdout) HandleSrunLine(run, pending);
      pending.clear();
    }
    return;
  }
  pending.append(buffer, n);
  size_t start = 0;
  for (size_t end = pending.find('\n'); end != std::string::npos;
       start = end + 1, end = pending.find('\n', start)) {
    const std::string_view line(pending.data() + start, end - start);
    if (is_stdout) {
      HandleLine(run, line, true, events);
    } else {
      HandleSrunLine(run, std::string(line));
    }
  }
  pending.erase(0, start);
}

void SlurmTransport::HandleLine(SlurmRun& run, std::string_view line, bool newline,
                                TransportEvents& events) {
  const SlurmTaskLine parsed = ParseSlurmTaskLine(line, newline, run.plan.marker);
  const int tasks = static_cast<int>(run.plan.task_ids.size());
  if (parsed.task < 0 || parsed.task >= tasks) {
    std::fprintf(stderr, "slurm: %s", parsed.output.c_str());
    return;
  }
  const int id = run.plan.task_ids[parsed.task];
  Heard(run, parsed.task);
  if (!parsed.output.empty() && !run.exited[parsed.task])
    events.OnOutput(id, OutputStream::kStdout, parsed.output);
  if (parsed.started) {
    run.started[parsed.task] = true;
    if (run.step_id.empty()) run.step_id = parsed.step_id;
  }
  if (parsed.exited && !run.exited[parsed.task]) {
    run.exited[parsed.task] = true;
    events.OnExit(id, ExitStatus::FromShellStatus(parsed.status));
  }
}

// "srun: error: node1: tasks 0-1: Killed" names tasks; a task's heartbeat is taken; anything
// else is passed on.
void SlurmTransport::HandleSrunLine(SlurmRun& run, const std::string& line) {
  const SlurmTaskLine beat = ParseSlurmTaskLine(line, false, run.plan.marker);
  if (beat.alive && beat.task < static_cast<int>(run.plan.task_ids.size())) {
    Heard(run, beat.task);
    return;
  }
  for (const char* word : {": tasks ", ": task "}) {
    const size_t at = line.find(word);
    if (at == std::string::npos) continue;
    const size_t list = at + std::strlen(word);
    const size_t colon = line.find(": ", list);
    if (colon == std::string::npos) break;
    try {
      const ExitStatus status = StatusFromSrunWords(line.substr(colon + 2));
      for (const std::string& task : ExpandHostlist("t[" + line.substr(list, colon - list) + "]")) {
        run.srun_reported[std::stoi(task.substr(1))] = status;
      }
      return;
    } catch (const std::exception&) {
      break;
    }
  }
  if (IsRoutineTaskMessage(line)) return;
  for (const char* routine : {"Job step aborted", "Force Terminated", "forcing job termination",
                              "Waiting up to", "Cancelled pending job step", "Terminating StepId",
                              "Job step created", "Step created", "interrupt (one more"}) {
    if (line.find(routine) != std::string::npos) return;
  }
  run.srun_errors.push_back(line);
  std::fprintf(stderr, "%s\n", line.c_str());
}

void SlurmTransport::Finish(SlurmRun& run, TransportEvents& events) {
  std::string why;
  for (const std::string& line : run.srun_errors) why += (why.empty() ? "" : "; ") + line;
  for (size_t t = 0; t < run.plan.task_ids.size(); ++t) {
    if (run.exited[t]) continue;
    run.exited[t] = true;
    const auto reported = run.srun_reported.find(static_cast<int>(t));
    ExitStatus status;
    if (reported != run.srun_reported.end()) {
      status = reported->second;
    } else if (run.started[t]) {
      status = ExitStatus::FromShellStatus(run.srun_status == 0 ? 137 : run.srun_status);
    } else {
      status.error =
          fmt::format("srun ended ({}) before task {} started on {}{}",
                      ExitStatus{run.srun_status, 0, ""}.Describe(), t,
                      run.plan.hosts[run.plan.task_node[t]], why.empty() ? "" : ": " + why);
    }
    events.OnExit(run.plan.task_ids[t], status);
  }
  run.done = true;
}

void SlurmTransport::Cancel(SlurmRun& run, int sig) {
  if (!run.step_id.empty()) {
    std::vector<std::string> argv = {"scancel", "--quiet"};
    if (sig != SIGKILL) argv.push_back("--signal=" + SignalName(sig).substr(3));
    argv.push_back(run.step_id);
    try {
      SlurmRun::PendingCancel cancel;
      cancel.sig = sig;
      cancel.scancel = StartSlurmClient(argv, {}, false);
      Subprocess::Close(cancel.scancel.out_fd);
      Subprocess::Close(cancel.scancel.err_fd);
      run.cancels.push_back(std::move(cancel));
      return;
    } catch (const Error&) {
    }
  }
  SignalSrun(run, sig);
}

// No task has started yet (or scancel failed): srun, on SIGTERM, cancels its own step. Only a
// second request to kill ends srun itself.
void SlurmTransport::SignalSrun(SlurmRun& run, int sig) {
  run.child.Signal(sig == SIGKILL && run.terminated ? SIGKILL : SIGTERM);
  run.terminated = true;
}

void SlurmTransport::SignalAll(int sig) {
  for (auto& run : runs_) {
    if (run->launched && !run->done && !run->reaped) Cancel(*run, sig);
  }
}

std::string SlurmTransport::NodeLabel(const std::string& machine) const {
  for (const NodeSpec& node : spec_.nodes) {
    if (node.MachineName() == machine) return node.host;
  }
  return machine;
}

void SlurmTransport::Heard(SlurmRun& run, int task) {
  if (run.node_heard.empty()) return;
  const int node = run.plan.task_node[task];
  run.node_heard[node] = Clock::now();
  run.node_heard_wall[node] = std::time(nullptr);
}

// Srun's own connections to a node that stopped answering time out only after minutes, and
// slurmctld declares it DOWN after SlurmdTimeout; dtrain does not wait for either. A lost node's
// running tasks end as lost; once no task runs, the step is cancelled (slurmctld kills what is
// left when the node answers again) and srun, which would wait for the lost node, is killed.
void SlurmTransport::WatchNodes(SlurmRun& run, TransportEvents& events) {
  if (node_timeout_s_ <= 0 || run.node_heard.empty()) return;
  const Clock::time_point now = Clock::now();
  if (!run.step_running) {
    // Silence counts from the step's first task start: srun may wait for its nodes before that.
    if (std::find(run.started.begin(), run.started.end(), true) == run.started.end()) return;
    run.step_running = true;
    run.node_heard.assign(run.node_heard.size(), now);
  }
  bool lost_any = false;
  for (size_t node = 0; node < run.plan.hosts.size(); ++node) {
    lost_any = lost_any || run.node_lost[node];
    const double silent_s = std::chrono::duration<double>(now - run.node_heard[node]).count();
    if (run.node_lost[node] || silent_s < node_timeout_s_) continue;
    std::vector<size_t> running;
    for (size_t t = 0; t < run.plan.task_ids.size(); ++t) {
      if (run.plan.task_node[t] == static_cast<int>(node) && !run.exited[t]) running.push_back(t);
    }
    if (running.empty()) continue;
    run.node_lost[node] = true;
    lost_any = true;
    const ExitStatus status =
        ExitStatus::NodeLost(NodeLabel(run.plan.hosts[node]), silent_s, run.node_heard_wall[node]);
    for (size_t t : running) {
      run.exited[t] = true;
      events.OnExit(run.plan.task_ids[t], status);
    }
  }
  if (!lost_any || run.srun_killed ||
      std::find(run.exited.begin(), run.exited.end(), false) != run.exited.end()) {
    return;
  }
  run.srun_killed = true;
  Cancel(run, SIGKILL);
  run.child.SignalGroup(SIGKILL);  // srun and the helper it forks
}

}  // namespace

std::unique_ptr<Transport> MakeSlurmTransport(const ClusterSpec& spec, double node_timeout_s) {
  return std::make_unique<SlurmTransport>(spec, node_timeout_s);
}

}  // namespace dtrain
