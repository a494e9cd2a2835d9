// `dtrain completion bash|zsh|fish`: a completion script written from the same CLI11 definitions
// that parse the command line, so it lists exactly the commands and options dtrain has.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "launcher/error.h"

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

std::string Bash(const CLI::App& app) {
  std::string names, cases;
  for (const CLI::App* cmd : Commands(app)) {
    names += (names.empty() ? "" : " ") + cmd->get_name();
    cases += fmt::format("    {}) opts='{}' ;;\n", cmd->get_name(), OptionWords(*cmd));
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
    out += fmt::format("complete -c dtrain -f -n __fish_use_subcommand -a {} -d '{}'\n",
                       cmd->get_name(), cmd->get_description().substr(0, 60));
    for (const CLI::Option* opt : cmd->get_options()) {
      std::string flags;
      for (const std::string& l : opt->get_lnames()) {
        flags += l == "np" ? " -o np" : " -l " + l;
      }
      for (const std::string& s : opt->get_snames()) flags += " -s " + s;
      if (flags.empty()) continue;
      std::string description = opt->get_description();
      for (char& c : description) c = c == '\'' ? '"' : c;
      out += fmt::format("complete -c dtrain -n '__fish_seen_subcommand_from {}'{}{} -d '{}'\n",
                         cmd->get_name(), flags, opt->get_expected_max() > 0 ? " -r" : "",
                         description.substr(0, 80));
    }
  }
  out += "complete -c dtrain -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n";
  return out;
}

}  // namespace

void AddCompletionCommand(CLI::App& app, CommandRun& run) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "completion", "Print a shell completion script: bash, zsh or fish");
  cmd->footer(
      "bash: source <(dtrain completion bash); zsh: source <(dtrain completion zsh); fish: "
      "dtrain completion fish | source. `cmake --install` installs all three.");
  cmd->add_option("shell", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  cmd->callback([shell, &app, &run] {
    run = [shell, &app] {
      const std::string text = *shell == "bash" ? Bash(app) : *shell == "zsh" ? Zsh(app) : Fish(app);
      std::fputs(text.c_str(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace dtrain
