#include "cli/argument_split.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "cli/did_you_mean.h"
#include "launcher/error.h"

namespace dtrain {
namespace {

// Subcommands whose first positional word starts a command of its own.
bool TakesCommand(const std::string& subcommand) {
  return subcommand == "launch";
}

std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> OptionNames(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back(l == "np" ? "-np" : "--" + l);
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// `--nproc_per_node=2` -> `--nproc-per-node=2`; `-np` -> `--np` (and horovodrun's -hostfile,
// -cb, and its old --log-hide-timestamp).
std::string Canonical(const std::string& word) {
  if (word == "-np") return "--np";
  if (word == "-hostfile") return "--hostfile";  // horovodrun's spelling
  if (word == "-prefix-timestamp") return "--prefix-output-with-timestamp";  // horovodrun's
  if (word == "-cb") return "--check-build";  // horovodrun's, not dtrain's -c b
  // horovodrun's old names of --log-without-timestamp / --log-with-timestamp, still read.
  if (word == "--log-hide-timestamp") return "--log-without-timestamp";
  if (word == "--no-log-hide-timestamp") return "--log-with-timestamp";
  if (word.rfind("--", 0) != 0) return word;
  const size_t eq = word.find('=');
  std::string name = word.substr(0, eq);
  for (char& c : name) c = c == '_' ? '-' : c;
  return eq == std::string::npos ? name : name + word.substr(eq);
}

[[noreturn]] void UnknownOption(const CLI::App& cmd, const std::string& command,
                                const std::string& word) {
  const std::string name = word.substr(0, word.find('='));
  std::string hint = DidYouMean(name, OptionNames(cmd));
  if (hint.empty() && (name == "--node-rank" || name == "--master-addr")) {
    hint =
        " (dtrain takes the nodes from -c FILE, -H HOST:SLOTS,... or --hostfile, and "
        "MASTER_ADDR is the first node's address)";
  }
  if (hint.empty() && name == "--check-build")
    hint = " (dtrain doctor shows every node's Horovod build)";
  if (hint.empty() &&
      (name == "--mpi" || name == "--jsrun" || name == "--mpi-args" || name == "--binding-args")) {
    hint = " (dtrain starts every rank itself and serves Horovod's Gloo rendezvous; no mpirun)";
  }
  throw UsageError(fmt::format(
      "{}: unknown option {}{}; `dtrain {} --help` lists the options{}", command, name, hint,
      command,
      TakesCommand(command) ? ", and a command's own options go after it (or after --)" : ""));
}

}  // namespace

std::vector<std::string> SplitArguments(const CLI::App& app, std::vector<std::string> args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return args;
  if (args[0] == "help") {
    if (args.size() == 1) return {"--help"};
    args.erase(args.begin());
    if (args.size() > 1) args.resize(1);
    args.push_back("--help");
  }
  const std::string command = args[0];
  const CLI::App* cmd = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == command) cmd = sub;
  }
  if (!cmd) {
    throw UsageError(fmt::format("unknown command '{}'{}; `dtrain --help` lists the commands",
                                 command, DidYouMean(command, SubcommandNames(app))));
  }
  std::vector<std::string> out = {command};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string word = Canonical(args[i]);
    if (word == "--") {
      out.insert(out.end(), args.begin() + i, args.end());
      return out;
    }
    const bool is_option = word.size() > 1 && word[0] == '-' &&
                           !(word[1] >= '0' && word[1] <= '9');  // "-1" is a value
    if (!is_option) {
      if (TakesCommand(command)) {
        out.push_back("--");
        out.insert(out.end(), args.begin() + i, args.end());
        return out;
      }
      out.push_back(word);
      continue;
    }
    const bool is_long = word.rfind("--", 0) == 0;
    const std::string name = is_long ? word.substr(0, word.find('=')) : word.substr(0, 2);
    const CLI::Option* opt = cmd->get_option_no_throw(name);
    if (!opt) UnknownOption(*cmd, command, word);
    out.push_back(word);
    const bool value_attached = is_long ? word.find('=') != std::string::npos : word.size() > 2;
    if (opt->get_expected_max() > 0 && !value_attached) {
      // The option's values (two for --blacklist-cooldown-range MIN MAX), whatever they look like.
      for (int n = std::max(1, opt->get_expected_min()); n > 0 && i + 1 < args.size(); --n)
        out.push_back(args[++i]);
    }
  }
  return out;
}

}  // namespace dtrain
