#include "launcher/file_timer.h"

#include <cstdlib>

#include "launcher/job_store.h"

namespace dtrain {

std::string_view FileTimerServerScript();  // templates/file_timer_server.py, embedded

namespace {

// A variable as the ranks will see it: the cluster file's env and -x, else dtrain's own.
std::string Setting(const ClusterSpec& spec, const char* name) {
  if (auto it = spec.env.find(name); it != spec.env.end()) return it->second;
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

FileTimer FileTimerOf(const ClusterSpec& spec) {
  FileTimer timer;
  timer.on = Setting(spec, "TORCHELASTIC_ENABLE_FILE_TIMER") == "1";
  if (timer.on) timer.path = Setting(spec, "TORCHELASTIC_TIMER_FILE");
  return timer;
}

std::vector<std::string> UnderFileTimer(const std::vector<std::string>& argv,
                                        const ClusterSpec& spec, const FileTimer& timer) {
  std::string python = JobPython(argv, spec);
  if (python.empty()) python = spec.python.empty() ? "python3" : spec.python;
  std::vector<std::string> out = {python, "-c", std::string(FileTimerServerScript()), timer.path,
                                  "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace dtrain
