// CLI11 validators that say what a number must be in words ("--nproc-per-node: expected a whole
// number of at least 1, got 0"), instead of printing a double's full range.
#pragma once

#include <CLI/CLI.hpp>

namespace dtrain {

CLI::Validator WholeNumberAtLeast(long long minimum);
CLI::Validator SecondsAtLeast(double minimum);
CLI::Validator PortNumber();

}  // namespace dtrain
