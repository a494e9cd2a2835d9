// CLI11 validators that say what a number must be in words ("--nproc-per-node: expected a whole
// number of at least 1, got 0"), instead of printing a double's full range.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dtrain {

CLI::Validator WholeNumberAtLeast(long long minimum);
CLI::Validator SecondsAtLeast(double minimum);
CLI::Validator PortNumber();
// 0 (off), or a factor above 1 (--straggler-factor 1.5).
CLI::Validator FactorAboveOneOrZero();
// A whole number of at least `minimum`, or one of `words` (--nproc-per-node 4 or gpu).
CLI::Validator CountOrOneOf(long long minimum, std::vector<std::string> words);
// Checks nothing, but names the values `words` as "{a,b}" for --help and shell completion, where
// the launch refuses other values itself, in its own words (--numa-binding).
CLI::Validator ValuesOffered(const std::vector<std::string>& words);

}  // namespace dtrain
