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

// --log-level's values, as horovodrun's config_parser.LOG_LEVELS.
inline const std::vector<std::string> kHorovodLogLevels = {"TRACE",   "DEBUG", "INFO",
                                                           "WARNING", "ERROR", "FATAL"};

struct HorovodrunOption {
  const char* name;  // "--fusion-threshold-mb"
  HorovodrunValue value;
  const char* variable;  // what it sets; nullptr: nothing (--no-autotune) or, for kList, the two
                         // interface variables
  const char* set_to;    // a flag's value; nullptr: the value given (--fusion-threshold-mb's in
                         // bytes)
  const char* needs;     // the option without which horovodrun ignores it, or nullptr
  const char* more;      // said in --help after the variable, or nullptr
};

// Every option, in horovodrun's --help order.
const std::vector<HorovodrunOption>& HorovodrunOptions();

// A number as horovodrun's argparse float prints it into a variable: "7" -> "7.0", "2.5" ->
// "2.5". `text` is a number (the option's check passed).
std::string PythonFloatText(const std::string& text);

// --help's text for `option`: "HOROVOD_AUTOTUNE_LOG (with --autotune)".
std::string HorovodrunHelp(const HorovodrunOption& option);

// The given options (name -> value as typed, "" for a flag; a repeated list option's values
// joined by commas) -> NAME=VALUE for every rank, as horovodrun sets them. An option horovodrun
// would ignore (an --autotune-* without --autotune, --timeline-mark-cycles without
// --timeline-filename) gets a note. Throws UsageError for an option given with its opposite.
std::vector<std::string> HorovodrunVariables(const std::map<std::string, std::string>& given,
                                             std::vector<std::string>& notes);

}  // namespace dtrain
