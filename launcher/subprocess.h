// Subprocess: one child of dtrain, the only way dtrain starts a process. The child runs argv
// with this process's environment plus overrides, in its own process group (a Ctrl-C at the
// terminal reaches dtrain alone), with each standard stream a pipe, /dev/null, a file or
// dtrain's own. The owner polls the pipes in its own loop and reaps with Done() or Finish().
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/exit_status.h"

namespace dtrain {

// Changes to the environment a child inherits: a value sets the variable, nullopt removes it.
using EnvOverrides = std::map<std::string, std::optional<std::string>>;

// This process's environment with `overrides` applied, as "NAME=value" strings sorted by name.
std::vector<std::string> MergeEnvironment(const EnvOverrides& overrides);

// The value of `name` in "NAME=value" strings; "" when absent.
std::string EnvironmentValue(const std::vector<std::string>& env, const std::string& name);

// The first executable file `name` names in the ':'-separated `path_env` (an empty entry is the
// current directory); `name` itself when it holds a '/'; "" when nothing matches.
std::string FindOnPath(const std::string& name, const std::string& path_env);

// Where one of a child's standard streams goes.
enum class Stdio {
  kNull,     // /dev/null
  kPipe,     // a pipe whose other end the Subprocess holds
  kInherit,  // dtrain's own
  kFile,     // a file, created or truncated (SubprocessOptions::out_file / err_file)
};

// What to start. Only argv is required.
struct SubprocessOptions {
  std::vector<std::string> argv;
  std::string program;  // the file executed; "" = argv[0], looked up in the child's PATH
  EnvOverrides env;     // on top of this process's environment
  std::string cwd;      // "" = dtrain's
  Stdio in = Stdio::kNull;
  Stdio out = Stdio::kPipe;
  Stdio err = Stdio::kPipe;
  std::string out_file;  // with out = kFile
  std::string err_file;  // with err = kFile
  // Runs in the child after its process group, streams, signals and directory are set, just
  // before exec. Only async-signal-safe calls (the child of a threaded process); see
  // launcher/local/group_guard.h for the one user.
  std::function<void()> pre_exec;
};

// A started child. Passive: it owns the pid and the pipe ends, nothing polls on its own.
// Destroying one whose child still runs kills the child's process group and reaps it.
class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  // Starts the child; returns "" or why it could not be started (nothing is left running then:
  // a child whose exec failed is reaped here).
  std::string Start(const SubprocessOptions& options);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }

  // Pipe ends dtrain holds (-1 when the stream is no pipe, or was closed). Owned here: whoever
  // closes one early does so with Close(), which sets it to -1.
  int in_fd = -1;   // write end of the child's stdin
  int out_fd = -1;  // read end of its stdout
  int err_fd = -1;  // read end of its stderr
  static void Close(int& fd);

  // Reads what one pipe holds now into `buffer`: the number of bytes, or 0 when nothing is
  // ready (a non-blocking pipe) or the pipe ended, which closes it (fd becomes -1).
  static size_t Read(int& fd, char* buffer, size_t size);

  // kill(2) of the child alone, or of its whole process group; kill's result.
  int Signal(int sig) const;
  int SignalGroup(int sig) const;

  // Reaps the child if it has ended, without waiting; true once reaped (status() is then set).
  bool Done();
  // Closes the pipes (what is left unread is dropped), waits for the child to end and returns
  // how it ended.
  ExitStatus Finish();
  const ExitStatus& status() const { return status_; }

 private:
  void Reaped(int wait_status);
  void Release();  // what the destructor does
  void CloseAll();

  pid_t pid_ = -1;
  bool reaped_ = false;
  ExitStatus status_;
};

}  // namespace dtrain
