// `dtrain completion bash|zsh|fish`: a completion script written from the same CLI11 definitions
// that parse the command line, so it lists exactly the commands and options dtrain has.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "launcher/error.h"
#include "runtime/formats/fish_string.h"

namespace dtrain {
namespace {

std::vector<const CLI::App*> Commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// "--log-dir --job -n ..." for one command; `-np` spelled as mpirun users type it.
std::string OptionWords(const CLI::App& cmd) {
  std::string words;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& l : opt->get_lnames()) words += (l == "np" ? " -np" : " --" + l);
    for (const std::string& s : opt->get_snames()) words += " -" + s;
  }
  return words.empty() ? words : words.substr(1);
}

// The values an option checks its value against (CLI::IsMember, described as "{a,b,c}"), in
// order; empty for any other option.
std::vector<std::string> Choices(const CLI::Option& opt) {
  std::vector<std::string> choices;
  auto& option = const_cast<CLI::Option&>(opt);  // CLI11 2.1 has no const get_validator
  for (int i = 0;; ++i) {
    const CLI::Validator* validator = nullptr;
    try {
      validator = option.get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    const std::string set = validator->get_description();
    if (set.size() < 3 || set.front() != '{' || set.back() != '}') continue;
    size_t from = 1;
    for (size_t comma; (comma = set.find(',', from)) != std::string::npos; from = comma + 1) {
      choices.push_back(set.substr(from, comma - from));
    }
    choices.push_back(set.substr(from, set.size() - 1 - from));
  }
  return choices;
}

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// `case $prev in` arms offering the choices after each option that has some.
std::string BashChoiceArms(const CLI::App& cmd) {
  std::string arms;
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::vector<std::string> choices = Choices(*opt);
    if (choices.empty() || opt->get_lnames().empty()) continue;
    std::string patterns;
    for (const std::string& l : opt->get_lnames())
      patterns += (patterns.empty() ? "--" : "|--") + l;
    for (const std::string& sn : opt->get_snames()) patterns += "|-" + sn;
    arms += fmt::format("        {}) COMPREPLY=($(compgen -W '{}' -- \"$cur\")); return ;;\n",
                        patterns, Joined(choices));
  }
  return arms.empty() ? arms
                      : "      case ${COMP_WORDS[COMP_CWORD-1]} in\n" + arms + "      esac\n";
}

std::string Bash(const CLI::App& app) {
  std::string names, cases;
  for (const CLI::App* cmd : Commands(app)) {
    names += (names.empty() ? "" : " ") + cmd->get_name();
    cases += fmt::format("    {})\n      opts='{}'\n{}      ;;\n", cmd->get_name(),
                         OptionWords(*cmd), BashChoiceArms(*cmd));
  }
  return fmt::format(R"sh(# bash completion for dtrain (`dtrain completion bash`)
_dtrain() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} opts='' i
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W '{} --help --version' -- "$cur"))
    return
  fi
  case ${{COMP_WORDS[1]}} in
{}  esac
  if [ "${{COMP_WORDS[1]}}" = help ]; then
    COMPREPLY=($(compgen -W '{}' -- "$cur"))
    return
  fi
  if [ "${{COMP_WORDS[1]}}" = completion ]; then
    COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur"))
    return
  fi
  for ((i = 2; i < COMP_CWORD; i++)); do  # past `--`, the rank command's words: files
    [ "${{COMP_WORDS[i]}}" = -- ] && {{ COMPREPLY=($(compgen -f -- "$cur")); return; }}
  done
  case $cur in
  -*) COMPREPLY=($(compgen -W "$opts" -- "$cur")) ;;
  *) COMPREPLY=($(compgen -f -- "$cur")) ;;
  esac
}}
complete -o filenames -F _dtrain dtrain
)sh",
                     names, cases, names);
}

std::string Zsh(const CLI::App& app) {
  return "#compdef dtrain\n# zsh completion for dtrain (`dtrain completion zsh`): the bash one, "
         "through bashcompinit\nautoload -U +X bashcompinit && bashcompinit\n" +
         Bash(app);
}

std::string Fish(const CLI::App& app) {
  std::string names;
  for (const CLI::App* cmd : Commands(app)) names += (names.empty() ? "" : " ") + cmd->get_name();
  std::string out = "# fish completion for dtrain (`dtrain completion fish`)\n";
  out += fmt::format("complete -c dtrain -f -n __fish_use_subcommand -a '{}'\n", names);
  for (const CLI::App* cmd : Commands(app)) {
    out += fmt::format("complete -c dtrain -f -n __fish_use_subcommand -a {} -d {}\n",
                       cmd->get_name(), clip::FishString(cmd->get_description().substr(0, 60)));
    for (const CLI::Option* opt : cmd->get_options()) {
      std::string flags;
      for (const std::string& l : opt->get_lnames()) {
        flags += l == "np" ? " -o np" : " -l " + l;
      }
      for (const std::string& s : opt->get_snames()) flags += " -s " + s;
      if (flags.empty()) continue;
      const std::vector<std::string> choices = Choices(*opt);
      std::string value = opt->get_expected_max() > 0 ? " -r" : "";
      if (!choices.empty()) value = " -x -a '" + Joined(choices) + "'";
      out += fmt::format("complete -c dtrain -n '__fish_seen_subcommand_from {}'{}{} -d {}\n",
                         cmd->get_name(), flags, value,
                         clip::FishString(opt->get_description().substr(0, 80)));
    }
  }
  out += "complete -c dtrain -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n";
  return out;
}

}  // namespace

void AddCompletionCommand(CLI::App& app, CommandRun& run) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("completion", "Print a shell completion script: bash, zsh or fish");
  cmd->footer(
      "bash: source <(dtrain completion bash); zsh: source <(dtrain completion zsh); fish: "
      "dtrain completion fish | source. `cmake --install` installs all three.");
  cmd->add_option("shell", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  cmd->callback([shell, &app, &run] {
    run = [shell, &app] {
      const std::string text = *shell == "bash"  ? Bash(app)
                               : *shell == "zsh" ? Zsh(app)
                                                 : Fish(app);
      std::fputs(text.c_str(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace dtrain
