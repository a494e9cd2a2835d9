#include "runtime/config/completion_script.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "runtime/formats/fish_string.h"

namespace dtrain::clip {
namespace {

bool IsFlagChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) ||
         std::isdigit(static_cast<unsigned char>(c)) || c == '-';
}

// A value the user types as written: "skip", "amp_bf16", "1"; not "PATH" or "cuda:N".
bool IsLiteral(const std::string& word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// Where a flag starts in an option column of `line` (first on an indented line, or after two
// spaces), from `from` on; npos if none.
size_t NextColumnFlag(const std::string& line, size_t from) {
  const size_t indent = line.find_first_not_of(' ');
  for (size_t p = line.find("--", from); p != std::string::npos; p = line.find("--", p + 1)) {
    const bool column = p == indent || (p >= 2 && line[p - 1] == ' ' && line[p - 2] == ' ');
    if (column && p + 2 < line.size() && std::islower(static_cast<unsigned char>(line[p + 2]))) {
      return p;
    }
  }
  return std::string::npos;
}

void ParseLine(const std::string& line, std::vector<UsageFlag>& flags) {
  if (line.empty() || line[0] != ' ') return;  // option lists are indented; prose is not
  for (size_t p = NextColumnFlag(line, 0); p != std::string::npos;) {
    size_t end = p + 2;
    while (end < line.size() && IsFlagChar(line[end])) ++end;
    UsageFlag flag;
    flag.name = line.substr(p, end - p);
    if (end < line.size() && line[end] != ' ') {  // "--flag=..." or punctuation: not an option
      p = NextColumnFlag(line, end);
      continue;
    }
    size_t rest = end;
    if (end + 1 < line.size() && line[end] == ' ' && line[end + 1] != ' ' && line[end + 1] != '-') {
      const size_t value_end = std::min(line.find(' ', end + 1), line.size());
      const std::string value = line.substr(end + 1, value_end - end - 1);
      flag.takes_value = true;
      if (value.find('|') != std::string::npos) {
        std::stringstream alternatives(value);
        for (std::string word; std::getline(alternatives, word, '|');) {
          if (IsLiteral(word)) {
            flag.choices.push_back(word);
          } else {
            flag.other_values = true;
          }
        }
      }
      rest = value_end;
    }
    const size_t next = NextColumnFlag(line, rest);
    flag.description =
        Trim(line.substr(rest, next == std::string::npos ? std::string::npos : next - rest));
    const bool seen = std::any_of(flags.begin(), flags.end(),
                                  [&](const UsageFlag& f) { return f.name == flag.name; });
    if (!seen) flags.push_back(std::move(flag));
    p = next;
  }
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string FunctionName(const std::string& program) {
  std::string name = "_" + program;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
      '_');
  return name;
}

std::string Bash(const std::string& program, const std::vector<CompletionCommand>& commands) {
  std::vector<std::string> names;
  for (const CompletionCommand& c : commands) names.push_back(c.name);
  std::ostringstream s;
  s << "# bash completion for " << program << " (`" << program << " completion bash`)\n"
    << FunctionName(program) << "() {\n"
    << "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts=''\n"
    << "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
    << "    COMPREPLY=($(compgen -W '" << Join(names) << " --help --version' -- \"$cur\"))\n"
    << "    return\n"
    << "  fi\n"
    << "  case ${COMP_WORDS[1]} in\n";
  for (const CompletionCommand& c : commands) {
    std::vector<std::string> words;
    std::vector<std::pair<std::string, std::string>> arms;  // "--a|--b", what follows them
    for (const UsageFlag& f : FlagsOfUsage(c.usage)) {
      words.push_back(f.name);
      if (!f.takes_value) continue;
      std::string reply = "$(compgen -f -- \"$cur\")";
      if (!f.choices.empty()) {
        reply = "$(compgen -W '" + Join(f.choices) + "' -- \"$cur\")" +
                (f.other_values ? " " + reply : "");
      }
      auto arm = std::find_if(arms.begin(), arms.end(), [&](auto& a) { return a.second == reply; });
      if (arm == arms.end()) {
        arms.emplace_back(f.name, reply);
      } else {
        arm->first += "|" + f.name;
      }
    }
    std::string value_arms;
    for (const auto& [patterns, reply] : arms) {
      value_arms += "      " + patterns + ")\n        COMPREPLY=(" + reply + "); return ;;\n";
    }
    if (std::find(words.begin(), words.end(), "--help") == words.end()) words.push_back("--help");
    s << "    " << c.name << ")\n"
      << "      opts='" << Join(words) << "'\n";
    if (!c.words.empty()) {
      s << "      [[ $cur != -* ]] && { COMPREPLY=($(compgen -W '" << Join(c.words)
        << "' -- \"$cur\")); return; }\n";
    }
    if (!value_arms.empty()) s << "      case $prev in\n" << value_arms << "      esac\n";
    s << "      ;;\n";
  }
  s << "  esac\n"
    << "  case $cur in\n"
    << "  -*) COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")) ;;\n"
    << "  *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
    << "  esac\n"
    << "}\n"
    << "complete -o filenames -F " << FunctionName(program) << " " << program << "\n";
  return s.str();
}

std::string Fish(const std::string& program, const std::vector<CompletionCommand>& commands) {
  std::ostringstream s;
  s << "# fish completion for " << program << " (`" << program << " completion fish`)\n";
  const std::string top = "complete -c " + program + " -n __fish_use_subcommand";
  for (const CompletionCommand& c : commands) {
    s << top << " -f -a " << c.name << " -d " << FishString(c.description) << "\n";
  }
  s << top << " -l help -d 'what it does and its commands'\n"
    << top << " -l version -d 'the version and what it was built with'\n";
  for (const CompletionCommand& c : commands) {
    const std::string in =
        "complete -c " + program + " -n " + FishString("__fish_seen_subcommand_from " + c.name);
    if (!c.words.empty()) s << in << " -f -a " << FishString(Join(c.words)) << "\n";
    bool help = false;
    for (const UsageFlag& f : FlagsOfUsage(c.usage)) {
      help = help || f.name == "--help";
      s << in << " -l " << f.name.substr(2);
      if (!f.choices.empty()) {
        s << (f.other_values ? " -r" : " -x") << " -a " << FishString(Join(f.choices));
      } else if (f.takes_value) {
        s << " -r";
      }
      if (!f.description.empty()) s << " -d " << FishString(f.description);
      s << "\n";
    }
    if (!help) s << in << " -l help -d 'what it does and its flags'\n";
  }
  return s.str();
}

}  // namespace

std::vector<UsageFlag> FlagsOfUsage(const std::string& usage) {
  std::vector<UsageFlag> flags;
  std::stringstream lines(usage);
  for (std::string line; std::getline(lines, line);) ParseLine(line, flags);
  return flags;
}

std::string CompletionScript(const std::string& shell, const std::string& program,
                             const std::vector<CompletionCommand>& commands) {
  if (shell == "bash") return Bash(program, commands);
  if (shell == "zsh") {
    return "#compdef " + program + "\n# zsh completion for " + program + " (`" + program +
           " completion zsh`): the bash one, through bashcompinit\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           Bash(program, commands);
  }
  if (shell == "fish") return Fish(program, commands);
  throw std::invalid_argument("no completion for shell '" + shell + "': bash, zsh or fish");
}

}  // namespace dtrain::clip
