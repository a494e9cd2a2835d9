// torchrun's -r/--redirects and -t/--tee, read as torchrun reads them ("3" for every local rank,
// or "0:1,1:2" per local rank), turned into what dtrain's console shows: every rank's log gets
// both streams anyway, and the console shows a stream that is not redirected, or is teed.
#pragma once

#include <map>
#include <string>

#include "launcher/console_echo.h"

namespace dtrain {

// Which streams each local rank shows on the console: `by_local_rank` where it names the local
// rank, else `others`.
struct ConsoleStreamsByLocalRank {
  ConsoleStreams others = ConsoleStreams::kBoth;
  std::map<int, ConsoleStreams> by_local_rank;
};

// `redirects` and `tee` as given ("" = not given, torchrun's 0). Throws UsageError naming the
// option for a value torchrun would refuse.
ConsoleStreamsByLocalRank TorchrunConsole(const std::string& redirects, const std::string& tee);

}  // namespace dtrain
