// Before CLI11 sees the command line: `dtrain help CMD` becomes `dtrain CMD --help`; an unknown
// command or option is refused with "did you mean"; mpirun's `-np` and torchrun's underscore
// spellings (--nproc_per_node) are accepted; and for `dtrain launch` the first word that is not
// one of its options starts the rank command (a `--` is put there), as torchrun, mpirun and srun
// read their command lines.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dtrain {

// `args`: argv without argv[0]. Returns the words for CLI11. Throws UsageError.
std::vector<std::string> SplitArguments(const CLI::App& app, std::vector<std::string> args);

}  // namespace dtrain
