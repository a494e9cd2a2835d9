// `dtrain-clip completion bash|zsh|fish`: shell completion written from the commands' own --help
// texts, so that it offers exactly the flags each command documents. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace dtrain::clip {

// One flag as a command's usage text documents it.
struct UsageFlag {
  std::string name;          // "--bad-data"
  bool takes_value = false;  // written "--flag VALUE": one space, then the value's name
  // The literal values the usage spells out, "--bad-data skip|fatal": skip, fatal. Lower-case
  // words only; a placeholder among them ("--resume PATH|latest", "cuda:N") sets other_values.
  std::vector<std::string> choices;
  bool other_values = false;
  std::string description;  // the rest of its line
};

// The flags of a usage text, in order, each once. A flag counts where an option list puts one:
// on an indented line, first or after two or more spaces ("  --epochs N (1)  --lr X (1e-3)");
// a flag named in running text ("... so --resume latest continues") does not. "--flag WORD"
// takes a value; "--flag" followed by two spaces, another flag or the line's end is a switch.
std::vector<UsageFlag> FlagsOfUsage(const std::string& usage);

struct CompletionCommand {
  std::string name;                // "train"
  std::string description;         // one line, shown by fish
  std::string usage;               // its --help text, where its flags come from
  std::vector<std::string> words;  // the words it takes besides flags ("bash zsh fish"), if any
};

// The completion script of `program` (a command name such as "dtrain-clip") for shell "bash",
// "zsh" or "fish"; throws std::invalid_argument for another shell. It offers the commands first,
// then the command's flags (and --help) where a word starts with "-"; after a flag with choices,
// the choices (and file names where other values are allowed); after another flag that takes a
// value, and elsewhere, file names.
std::string CompletionScript(const std::string& shell, const std::string& program,
                             const std::vector<CompletionCommand>& commands);

}  // namespace dtrain::clip
