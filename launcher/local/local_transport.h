// The local transport: every process runs on this machine, each in its own process group, with
// a pipe for stdout and one for stderr, read in one poll loop.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "launcher/local/rank_cgroup.h"
#include "launcher/local/rank_orphans.h"
#include "launcher/subprocess.h"
#include "launcher/transport.h"

namespace dtrain {

// One process started here: the child (its pid is also its process group id, its pipes carry
// stdout, stderr and stdin), the bytes still owed to its stdin, and how it ended once reaped.
struct LocalProcess {
  int id = 0;
  Subprocess child;
  std::string input;                // stdin bytes not yet written
  bool reaped = false;              // the child was reaped, or never started (status says why)
  bool group_gone = false;          // no process of its group is left
  bool reported = false;            // OnExit was delivered
  int64_t oom_kills_at_start = -1;  // this machine's OOM kill count when it started (oom_kill.h)
  ExitStatus status;
  RankCgroup cgroup;  // where this machine allows one; killed and removed with the process
};

// Runs ProcessSpecs as children of this process (launcher/subprocess.h). Poll() reads every pipe
// with poll(2) and reaps without waiting; SignalAll() signals only the groups it started.
class LocalTransport : public Transport {
 public:
  // `default_cwd`: where processes run when ProcessSpec::cwd is empty ("" = this process's cwd).
  explicit LocalTransport(std::string default_cwd);
  // Whatever is still running is killed and reaped (by each Subprocess), with whatever is in
  // each process's cgroup, then the orphans that left their groups, so no process outlives the
  // transport; then the shared memory segments the ranks left (shm_leftovers.h) are removed.
  ~LocalTransport() override;

  void Start(const std::vector<ProcessSpec>& procs, TransportEvents& events) override;
  bool Poll(int timeout_ms, TransportEvents& events) override;
  void SignalAll(int sig) override;

 private:
  void Spawn(const ProcessSpec& spec, LocalProcess& proc);
  // Reads what is available on one stream (at most `budget` bytes). Closes it at end of file.
  void ReadOutput(LocalProcess& proc, OutputStream stream, size_t budget, TransportEvents& events);
  // Both streams, stdout first.
  void ReadAllOutput(LocalProcess& proc, size_t budget, TransportEvents& events);
  void WriteInput(LocalProcess& proc);
  void Reap(LocalProcess& proc);
  // A process killed by SIGKILL that dtrain did not send, while this machine's OOM kill count
  // went up: the line saying so goes to its stderr (oom_kill.h).
  void ReportOomKill(LocalProcess& proc, TransportEvents& events);

  std::string default_cwd_;
  std::vector<LocalProcess> procs_;
  bool killed_ = false;  // SignalAll(SIGKILL) was sent: a SIGKILL since then is dtrain's own
  RankOrphans orphans_;  // descendants that outlived their guard
  std::time_t ranks_since_ = 0;  // when the first process that is no step of dtrain's own started
};

// Where `name` (argv[0]) is executed from: itself when it holds a '/', else the first executable
// match on `path_env`; dtrain's own programs (dtrain, dtrain-clip) are looked for as
// templates/dtrain_program.sh does on remote nodes: beside the running executable, on PATH, then
// /usr/local/bin, /usr/bin, ~/.local/bin. Empty when nothing matches.
std::string ResolveExecutable(const std::string& name, const std::string& path_env);

// The directory of the running executable (from /proc/self/exe); "" if unknown.
std::string SelfExecutableDir();

}  // namespace dtrain
