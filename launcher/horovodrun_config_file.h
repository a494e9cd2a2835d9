// horovodrun's --config-file: a YAML file of the same tuning values as its options (params,
// autotune, timeline, stall_check, library_options, logging, controller), read as horovodrun 0.28
// reads it (its config_parser.set_args_from_config): a value from the command line wins over the
// file's.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dtrain {

// Adds to `given` (option name -> value, "" for a flag; horovodrun_options.h) each value of the
// file at `path` whose option, or its opposite, the command line did not give. A key horovodrun
// does not read gets a note in `notes`. Throws UsageError naming FILE:LINE:COL and the key for a
// file that cannot be read, is not YAML, or holds a value horovodrun would refuse.
void ReadHorovodrunConfig(const std::string& path, std::map<std::string, std::string>& given,
                          std::vector<std::string>& notes);

}  // namespace dtrain
