// `dtrain sync`: flags -> ClusterChoice -> RunSync.
#include "cli/commands.h"
#include "launcher/ssh/workdir_sync.h"

namespace dtrain {

void AddSyncCommand(CLI::App& app, CommandRun& run) {
  auto choice = std::make_shared<ClusterChoice>();
  CLI::App* cmd = app.add_subcommand(
      "sync", "Copy the launch directory to every node's workdir that does not share it");
  cmd->footer(
      "Only files whose size, time and content hash differ move; files an earlier sync put on a "
      "node and deleted here are deleted there; .gitignore and .dtrainignore are honoured; nodes "
      "that share the folder (same file seen there) are skipped. All nodes at once; each file "
      "appears whole or not at all.\n"
      "Ctrl-C stops it at once; a node not done throws its partial copy away.\n"
      "Exit status: 0 when every node is in sync, 1 when a node failed (named with the reason), "
      "2 for a usage or cluster-file error, 130 when interrupted. More: man dtrain-sync");
  cmd->add_option("-c,--cluster", choice->cluster_file,
                  "cluster file (default: ./cluster.yaml); its workdir is the destination");
  cmd->add_option("-H,--hosts", choice->hosts,
                  "nodes as HOST[:SLOTS],...; the destination is this directory's own path");
  cmd->add_option("--hostfile", choice->hostfile, "nodes from a file of 'HOST slots=N' lines");
  cmd->callback([choice, &run] { run = [choice] { return RunSync(*choice); }; });
}

}  // namespace dtrain
