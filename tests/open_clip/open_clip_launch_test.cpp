// OpenCLIP's own training (python -m open_clip_train.main's main(), from open_clip_torch in .venv)
// under `dtrain launch`, 2 ranks over Gloo on the CPU: locally, and on two namespace nodes over
// ssh (root; skipped otherwise). The entry script lives outside the workdir and imports a module
// that lives only in the workdir, so it trains only if PYTHONPATH carries the workdir to every
// rank. That module registers the fmnist-tiny OpenCLIP config, prints each rank's loss, and lets
// OpenCLIP's DDP wrapping run on CPU modules.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kBin = DTRAIN_BINARY_DIR;
const std::string kSource = DTRAIN_SOURCE_DIR;
const std::string kPython = kSource + "/.venv/bin/python3";

// Exported Fashion-MNIST (CSV with absolute image paths; the columns and tab separator are
// OpenCLIP's defaults), the workdir module and the entry script.
struct OpenClipProject {
  std::string root, workdir, script, csv;

  explicit OpenClipProject(const std::string& dir) : root(dir) {
    fs::remove_all(root);
    workdir = root + "/work";
    fs::create_directories(workdir);
    fs::create_directories(root + "/scripts");
    const std::string out = RunOutput(kBin + "/dtrain-clip export-data --format csv --limit 128 --out " +
                                      root + "/data 2>&1");
    // OpenCLIP opens the paths as written: make them absolute.
    csv = root + "/train.csv";
    RunOutput("awk -F'\\t' -v OFS='\\t' 'NR==1{print;next}{$1=\"" + root +
              "/data/\"$1; print}' " + root + "/data/fashion-mnist-train.csv > " + csv);
    std::ofstream(workdir + "/fmnist_openclip.py")
        << "import os\nimport open_clip\nimport open_clip.loss\n"
        << "open_clip.add_model_config('" << kSource << "/tests/open_clip/fmnist-tiny-bpe.json')\n"
        << "_forward = open_clip.loss.ClipLoss.forward\n"
        << "def forward(self, *args, **kwargs):\n"
        << "    out = _forward(self, *args, **kwargs)\n"
        << "    total = sum(out.values()) if isinstance(out, dict) else out\n"
        << "    print(f\"rank {os.environ['RANK']} loss {float(total):.4f}\", flush=True)\n"
        << "    return out\n"
        << "open_clip.loss.ClipLoss.forward = forward\n"
        // open_clip_train wraps the model in DDP with device_ids=[device] even on the CPU, which
        // torch 2.x refuses for CPU modules: drop device_ids there, as a CPU user must.
        << "import torch\n"
        << "_ddp_init = torch.nn.parallel.DistributedDataParallel.__init__\n"
        << "def ddp_init(self, module, device_ids=None, *args, **kwargs):\n"
        << "    if device_ids and all(torch.device(d).type == 'cpu' for d in device_ids):\n"
        << "        device_ids = None\n"
        << "    _ddp_init(self, module, device_ids, *args, **kwargs)\n"
        << "torch.nn.parallel.DistributedDataParallel.__init__ = ddp_init\n";
    script = root + "/scripts/train_openclip.py";
    std::ofstream(script) << "import sys\n"
                          << "import fmnist_openclip  # only in the workdir: found through PYTHONPATH\n"
                          << "from open_clip_train.main import main\n"
                          << "main(sys.argv[1:])\n";
  }

  std::string Command(const std::string& logs) const {
    return kPython + " " + script + " --train-data " + csv +
           " --dataset-type csv --model fmnist-tiny-bpe --batch-size 16 --epochs 1 --workers 0 --device cpu"
           " --dist-backend gloo --precision fp32 --lr 1e-3 --warmup 1 --log-every-n-steps 1"
           " --save-frequency 1 --seed 0 --name run --logs " +
           logs;
  }
};

// Steps each rank's log shows a loss for.
int LossLines(const std::string& log, int rank) {
  const std::regex line("rank " + std::to_string(rank) + " loss [0-9.]+");
  return static_cast<int>(std::distance(std::sregex_iterator(log.begin(), log.end(), line),
                                        std::sregex_iterator()));
}

void ExpectBothRanksTrained(const std::string& job_dir, const std::string& openclip_logs) {
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadText(job_dir + "/rank-" + std::to_string(rank) + ".log");
    // 128 samples, 16 per rank per step: 4 steps on each rank.
    EXPECT_EQ(LossLines(log, rank), 4) << "rank " << rank << " log:\n" << log;
  }
  EXPECT_TRUE(fs::exists(openclip_logs + "/run/checkpoints/epoch_1.pt"))
      << "rank 0 writes OpenCLIP's checkpoint under " << openclip_logs;
}

std::string Launch(const std::string& cluster_file, const std::string& logs,
                   const std::string& command) {
  return RunOutput(kBin + "/dtrain launch -q -c " + cluster_file + " --log-dir " + logs +
                   " --job openclip -- " + command + " 2>&1; echo \"status=$?\"");
}

TEST(OpenClipLaunch, TwoLocalRanksTrainWithTheWorkdirOnPythonpath) {
  const std::string dir = kBin + "/open_clip_launch/local";
  OpenClipProject project(dir);
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster) << "transport: local\nnodes:\n  - {host: localhost, slots: 2}\n"
                         << "workdir: " << project.workdir << "\npython: " << kPython << "\n";
  const std::string out = Launch(cluster, dir + "/logs", project.Command(dir + "/openclip"));
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  ExpectBothRanksTrained(dir + "/logs/openclip", dir + "/openclip");
}

TEST(OpenClipLaunch, TwoSshNodesTrainWithTheWorkdirOnPythonpath) {
  SshTestCluster cluster("open-clip-2x1", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir() + "/project";
  OpenClipProject project(dir);
  const std::string cluster_file = cluster.dir() + "/cluster-openclip.yaml";
  std::ofstream(cluster_file) << ReadText(cluster.cluster_file()) << "workdir: " << project.workdir
                              << "\npython: " << kPython
                              << "\nenv: {GLOO_SOCKET_IFNAME: eth0}\n";
  const std::string out =
      Launch(cluster_file, dir + "/logs", "sh -c 'echo host=$(hostname); exec " +
                                              project.Command(dir + "/openclip") + "'");
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  ExpectBothRanksTrained(dir + "/logs/openclip", dir + "/openclip");
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(ReadText(dir + "/logs/openclip/rank-" + std::to_string(rank) + ".log")
                  .find("host=node" + std::to_string(rank)),
              std::string::npos)
        << "rank " << rank << " runs on node" << rank;
  }
}

}  // namespace
}  // namespace dtrain
