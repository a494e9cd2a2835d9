// RankOutputCopy: a copy of the ranks' output kept beside their logs (torchrun's
// --duplicate-*-filters, horovodrun's --output-filename). The logs' writer (rank_log_writer.h)
// gives each copy the output on its own thread, in the order the ranks wrote it, so that a drive
// that hangs under a copy holds that thread and not the job.
#pragma once

#include <string>
#include <string_view>

#include "launcher/transport.h"

namespace dtrain {

class RankOutputCopy {
 public:
  virtual ~RankOutputCopy() = default;
  virtual void Output(int rank, OutputStream stream, std::string_view bytes) = 0;
  // The rank ended (or lost output to a drive that hung): its unterminated last line, if any, is
  // taken now.
  virtual void Finish(int rank) = 0;
  // The file that rank `rank`'s `stream` is copied to: a write to it that does not return is said
  // with it.
  virtual std::string PathOf(int rank, OutputStream stream) const = 0;
};

}  // namespace dtrain
