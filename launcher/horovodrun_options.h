// horovodrun's options that become every rank's environment (tuning, autotune, timeline, stall
// check, library, logging, network interfaces), each turned into the variables horovodrun sets
// for it, so that a horovodrun command line pasted after `dtrain launch` tunes Horovod alike.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dtrain {

// What an option takes.
enum class HorovodrunValue {
  kFlag,      // nothing
  kWhole,     // a whole number >= 0
  kNumber,    // a number >= 0
  kText,      // a file name
  kLogLevel,  // TRACE, DEBUG, INFO, WARNING, ERROR or FATAL
  kList,      // comma-separated names (network interfaces)
};

struct HorovodrunOption {
  const char* name;  // "--fusion-threshold-mb"
  HorovodrunValue value;
  const char* help;
};

// Every option, in horovodrun's --help order.
const std::vector<HorovodrunOption>& HorovodrunOptions();

// The given options (name -> value as typed, "" for a flag; a repeated list option's values
// joined by commas) -> NAME=VALUE for every rank, as horovodrun sets them. An option horovodrun
// would ignore (an --autotune-* without --autotune, --timeline-mark-cycles without
// --timeline-filename) gets a note. Throws UsageError for an option given with its opposite.
std::vector<std::string> HorovodrunVariables(const std::map<std::string, std::string>& given,
                                             std::vector<std::string>& notes);

}  // namespace dtrain
