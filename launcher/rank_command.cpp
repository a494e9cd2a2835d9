#include "launcher/rank_command.h"

#include "launcher/file_timer.h"
#include "launcher/numa_binding.h"

namespace dtrain {

std::vector<std::string> RankCommand(const std::vector<std::string>& command,
                                     const ClusterSpec& spec, const std::string& numa_binding) {
  const FileTimer timer = FileTimerOf(spec);
  std::vector<std::string> argv = timer.on ? UnderFileTimer(command, spec, timer) : command;
  return numa_binding.empty() ? argv : UnderNumaBinding(argv, numa_binding);
}

}  // namespace dtrain
