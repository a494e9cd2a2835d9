// `dtrain init [--template local|ssh|slurm] [-o FILE] [--force]`: writes a commented cluster file.
#include <cstdio>

#include "cli/commands.h"
#include "launcher/cluster_template.h"
#include "launcher/error.h"

namespace dtrain {

namespace {
struct InitFlags {
  std::string template_name = "local";
  std::string output = "cluster.yaml";
  bool force = false;
};
}  // namespace

void AddInitCommand(CLI::App& app, CommandRun& run) {
  auto flags = std::make_shared<InitFlags>();
  CLI::App* cmd = app.add_subcommand("init", "Write a commented cluster file template");
  cmd->add_option("--template,-t", flags->template_name, "local, ssh or slurm")
      ->check(CLI::IsMember(ClusterTemplateNames()))
      ->capture_default_str();
  cmd->add_option("-o,--output", flags->output, "file to write (- for stdout)")
      ->capture_default_str();
  cmd->add_flag("--force", flags->force, "replace FILE if it exists");
  cmd->callback([flags, &run] {
    run = [flags] {
      WriteClusterTemplate(flags->template_name, flags->output, flags->force);
      if (flags->output != "-") {
        std::fprintf(stderr, "wrote %s (%s template); edit it, then: dtrain launch -c %s\n",
                     flags->output.c_str(), flags->template_name.c_str(), flags->output.c_str());
      }
      return kExitOk;
    };
  });
}

}  // namespace dtrain
