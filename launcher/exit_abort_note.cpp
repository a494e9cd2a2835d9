#include "launcher/exit_abort_note.h"

#include <csignal>

namespace dtrain {

std::string ExitAbortNote(const ExitStatus& status, const std::vector<std::string>& tail) {
  if (status.signal != SIGABRT) return "";
  for (auto line = tail.rbegin(); line != tail.rend(); ++line) {
    if (line->find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line->find("terminate called without an active exception") == std::string::npos) return "";
    return "dtrain: note: aborted by std::terminate with no exception: if the program uses "
           "torch.distributed and does not call dist.destroy_process_group() before it ends, "
           "this is torch's race at interpreter exit (pytorch/pytorch#190489, under torchrun "
           "too): call it at the end of the program\n";
  }
  return "";
}

}  // namespace dtrain
