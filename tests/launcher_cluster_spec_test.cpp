// The cluster-file parser: every key of DESIGN.md, and broken files that must give
// FILE:LINE:COL errors naming the expectation — never a crash.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/cluster_choice.h"
#include "launcher/cluster_spec.h"
#include "launcher/cluster_template.h"
#include "launcher/error.h"
#include "launcher/local_device_count.h"
#include "tests/support/cluster_text.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kFullExample[] = R"(name: lab
transport: ssh
ssh:
  user: alice
  port: 2222
  identity_file: ~/.ssh/id_ed25519
  known_hosts: ~/.ssh/known_hosts
  host_key_policy: accept-new
  connect_timeout: 7
nodes:
  - host: gpu-a
    address: 10.0.0.11
    slots: 8
    gpus: [0,1,2,3,4,5,6,7]
    env: {NCCL_SOCKET_IFNAME: eth0}
  - host: gpu-b
rendezvous:
  port: 29501
workdir: /shared/project
python: /opt/venv/bin/python3
env: {NCCL_DEBUG: WARN, ANSWER: 42}
expect: {cuda: "12.4", nccl: "2.21", python: "3.11", torch: "2.4"}
log_dir: ./my-logs
job:
  command: [dtrain-clip, train, --dataset-type, fashion-mnist]
  max_restarts: 3
  timeline: true
slurm: {partition: debug, time: "00:30:00", account: proj, options: {qos: high}}
)";

std::string ErrorOf(const std::string& text) {
  return testing::ClusterTextError(text);
}

TEST(ClusterSpec, ReadsEveryKey) {
  ClusterSpec s = ParseClusterText(kFullExample, "c.yaml");
  EXPECT_EQ(s.source, "c.yaml");
  EXPECT_EQ(s.name, "lab");
  EXPECT_EQ(s.transport, TransportKind::kSsh);
  EXPECT_EQ(s.ssh.user, "alice");
  EXPECT_EQ(s.ssh.port, 2222);
  EXPECT_EQ(s.ssh.identity_file, "~/.ssh/id_ed25519");
  EXPECT_EQ(s.ssh.known_hosts, "~/.ssh/known_hosts");
  EXPECT_EQ(s.ssh.host_key_policy, HostKeyPolicy::kAcceptNew);
  EXPECT_EQ(s.ssh.connect_timeout_s, 7);
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0].host, "gpu-a");
  EXPECT_EQ(s.nodes[0].address, "10.0.0.11");
  EXPECT_EQ(s.nodes[0].slots, 8);
  EXPECT_EQ(s.nodes[0].gpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(s.nodes[0].env.at("NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(s.nodes[1].host, "gpu-b");
  EXPECT_EQ(s.nodes[1].address, "gpu-b");
  EXPECT_EQ(s.nodes[1].slots, 1);
  EXPECT_TRUE(s.nodes[1].gpus.empty());
  EXPECT_EQ(s.rendezvous_port, 29501);
  EXPECT_EQ(s.workdir, "/shared/project");
  EXPECT_EQ(s.python, "/opt/venv/bin/python3");
  EXPECT_EQ(s.env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(s.env.at("ANSWER"), "42");
  EXPECT_EQ(s.expect.at("torch"), "2.4");
  EXPECT_EQ(s.expect.size(), 4u);
  EXPECT_EQ(s.log_dir, "./my-logs");
  EXPECT_EQ(s.job.command,
            (std::vector<std::string>{"dtrain-clip", "train", "--dataset-type", "fashion-mnist"}));
  EXPECT_EQ(s.job.max_restarts, 3);
  EXPECT_TRUE(s.job.timeline);
  EXPECT_EQ(s.slurm.partition, "debug");
  EXPECT_EQ(s.slurm.time, "00:30:00");
  EXPECT_EQ(s.slurm.account, "proj");
  EXPECT_EQ(s.slurm.extra.at("qos"), "high");
}

// torchrun's --nproc-per-node gpu|cpu|auto: a node's GPUs are its gpus: list; this machine's
// GPUs and CPUs are counted here; another node's are not known, and the error names it.
TEST(ClusterSpec, CountedRanksPerNodeAsTorchrunCountsThem) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/gpus.yaml";
  std::ofstream(file) << "transport: ssh\n"
                         "nodes:\n"
                         "  - {host: a, address: 10.9.0.1, gpus: [0, 1, 2, 3]}\n"
                         "  - {host: b, address: 10.9.0.2, gpus: [4, 5]}\n";
  ClusterChoice choice;
  choice.cluster_file = file;
  choice.nproc_kind = "gpu";
  ChosenCluster chosen = ChooseCluster(choice);
  EXPECT_EQ(chosen.spec.nodes[0].slots, 4);
  EXPECT_EQ(chosen.spec.nodes[1].slots, 2);
  EXPECT_EQ(chosen.ranks_why, "4,2 per node (--nproc-per-node gpu)");
  choice.nproc_kind = "auto";
  EXPECT_EQ(ChooseCluster(choice).spec.nodes[1].slots, 2);
  choice.nproc_kind = "cpu";  // node a's CPUs are on node a
  try {
    ChooseCluster(choice);
    FAIL() << "a remote node's CPUs were counted here";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node a is not this machine and its CPUs are not known"));
  }
  // This machine: CUDA_VISIBLE_DEVICES counts its GPUs; auto falls back to its CPUs.
  ClusterChoice here;
  here.hosts = "localhost:1";
  here.nproc_kind = "auto";
  const char* had = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string before = had ? had : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "0,1,2", 1);
  EXPECT_EQ(ChooseCluster(here).spec.nodes[0].slots, 3);
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(ChooseCluster(here).spec.nodes[0].slots, LocalCpuCount());
  here.nproc_kind = "gpu";
  try {
    ChooseCluster(here);
    FAIL() << "no GPU, yet --nproc-per-node gpu was taken";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no GPU on this machine (CUDA_VISIBLE_DEVICES='' names none)"));
  }
  // The CUDA_VISIBLE_DEVICES the cluster file or -x gives the ranks is what they count, over this
  // process's own.
  here.pass_env = {"CUDA_VISIBLE_DEVICES=0,1"};
  here.nproc_kind = "gpu";
  EXPECT_EQ(ChooseCluster(here).spec.nodes[0].slots, 2);
  if (had)
    ::setenv("CUDA_VISIBLE_DEVICES", before.c_str(), 1);
  else
    ::unsetenv("CUDA_VISIBLE_DEVICES");
}

// A node asked for its GPUs (8 here) gets as many ranks as its ranks' CUDA_VISIBLE_DEVICES lets
// torch.cuda.device_count() see there: the node's own env over the file's, entries up to the
// first that names no GPU of the node.
TEST(ClusterSpec, CountedGpusOfANodeAreTheOnesItsRanksSee) {
  const std::string dir = ::testing::TempDir() + "/visible";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/cluster.yaml";
  std::ofstream(file)
      << "transport: ssh\n"
         "env: {CUDA_VISIBLE_DEVICES: '4,5,6'}\n"
         "nodes:\n"
         "  - {host: a, address: 10.9.0.1}\n"
         "  - {host: b, address: 10.9.0.2, env: {CUDA_VISIBLE_DEVICES: '0,9,1'}}\n"
         "  - {host: c, address: 10.9.0.3, env: {CUDA_VISIBLE_DEVICES: '7,GPU-1f2e'}}\n";
  const NodeDeviceCounter eight_gpus = [](const ClusterSpec& spec) {
    std::map<std::string, NodeDevices> out;
    for (const NodeSpec& node : spec.nodes) out[node.host] = NodeDevices{8, 64, ""};
    return out;
  };
  ClusterChoice choice;
  choice.cluster_file = file;
  choice.nproc_kind = "gpu";
  ChosenCluster chosen = ChooseCluster(choice, eight_gpus);
  EXPECT_EQ(chosen.spec.nodes[0].slots, 3);                      // the file's 4,5,6
  EXPECT_EQ(chosen.spec.nodes[1].slots, 1);                      // 0, then 9 is past its 8 GPUs
  EXPECT_EQ(chosen.spec.nodes[2].slots, 2);                      // an index and a UUID
  choice.pass_env = {"CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7,8"};  // -x: over every node's own
  chosen = ChooseCluster(choice, eight_gpus);
  for (const NodeSpec& node : chosen.spec.nodes) EXPECT_EQ(node.slots, 8) << node.host;
  choice.pass_env = {"CUDA_VISIBLE_DEVICES=9"};
  try {
    ChooseCluster(choice, eight_gpus);
    FAIL() << "CUDA_VISIBLE_DEVICES=9 on 8-GPU nodes gave ranks";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no GPU on node a (the CUDA_VISIBLE_DEVICES='9' its ranks get "
                                    "names none of its 8 GPU(s))"));
  }
  choice.nproc_kind = "auto";  // auto: then the node's CPUs
  EXPECT_EQ(ChooseCluster(choice, eight_gpus).spec.nodes[0].slots, 64);
}

// torchrun's rendezvous options: --standalone is this machine whatever ./cluster.yaml says; the
// endpoint's port is the job's rendezvous port and its host is checked against the first node;
// what does not apply is said.
TEST(ClusterSpec, TorchrunsRendezvousOptions) {
  const std::string dir = ::testing::TempDir() + "/torchrun-rdzv";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/cluster.yaml";
  std::ofstream(file) << "transport: ssh\n"
                         "nodes:\n"
                         "  - {host: a, address: 10.9.0.1}\n"
                         "  - {host: b, address: 10.9.0.2}\n";
  auto notes = [](const ChosenCluster& chosen) {
    std::string all;
    for (const std::string& note : chosen.notes) all += note + "\n";
    return all;
  };
  const std::string before = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  ClusterChoice standalone;
  standalone.torchrun.standalone = true;
  standalone.torchrun.id = "run-1";
  const char* had_port = std::getenv("MASTER_PORT");
  const std::string port_before = had_port ? had_port : "";
  ::setenv("MASTER_PORT", "1234", 1);
  ChosenCluster here = ChooseCluster(standalone);
  std::filesystem::current_path(before);
  if (had_port)
    ::setenv("MASTER_PORT", port_before.c_str(), 1);
  else
    ::unsetenv("MASTER_PORT");
  EXPECT_EQ(here.spec.transport, TransportKind::kLocal);
  EXPECT_EQ(here.source, "--standalone (this machine)");
  EXPECT_NE(here.spec.rendezvous_port, 1234);
  EXPECT_EQ(here.port_why, "a free port, held until rank 0 binds it");
  EXPECT_THAT(notes(here), HasSubstr("./cluster.yaml is not used"));
  EXPECT_THAT(notes(here), HasSubstr("MASTER_PORT=1234 is not used"));
  EXPECT_THAT(notes(here), HasSubstr("--rdzv-id run-1 is not used"));
  standalone.cluster_file = file;
  EXPECT_THROW(ChooseCluster(standalone), Error);

  ClusterChoice nodes;
  nodes.cluster_file = file;
  nodes.torchrun.endpoint = "b:29444";
  nodes.torchrun.backend = "etcd";
  nodes.torchrun.conf = "join_timeout=900,read_timeout=60,last_call_timeout=10";
  ChosenCluster chosen = ChooseCluster(nodes);
  EXPECT_EQ(chosen.spec.rendezvous_port, 29444);
  EXPECT_EQ(chosen.port_why, "--rdzv-endpoint");
  EXPECT_THAT(notes(chosen), HasSubstr("the rendezvous is on the first node, a (10.9.0.1), where "
                                       "dtrain hosts the job's store, not on b; list it first"));
  EXPECT_THAT(notes(chosen), HasSubstr("--rdzv-backend etcd: no etcd server is contacted"));
  EXPECT_THAT(notes(chosen), HasSubstr("--rdzv-conf read_timeout=60 is not used"));
  EXPECT_THAT(notes(chosen), Not(HasSubstr("join_timeout=900")));
  EXPECT_THAT(notes(chosen), Not(HasSubstr("last_call_timeout=10")));
  EXPECT_EQ(JoinTimeoutS(nodes.torchrun), 900);
  nodes.torchrun = {};
  nodes.torchrun.endpoint = "10.9.0.1";  // the first node's address; no port: the default's
  chosen = ChooseCluster(nodes);
  EXPECT_EQ(chosen.spec.rendezvous_port, 29500);
  EXPECT_TRUE(chosen.notes.empty()) << notes(chosen);
  nodes.torchrun.backend = "c10d";  // torchrun's c10d backend: 29400 where the endpoint has none
  chosen = ChooseCluster(nodes);
  EXPECT_EQ(chosen.spec.rendezvous_port, 29400);
  EXPECT_EQ(chosen.port_why, "torchrun's c10d default, as --rdzv-endpoint names no port");
  nodes.master_port = 29501;  // a port given anywhere wins
  EXPECT_EQ(ChooseCluster(nodes).spec.rendezvous_port, 29501);
  nodes.master_port = 0;
  nodes.torchrun.backend = "";
  nodes.torchrun.endpoint = "elsewhere:29444";
  EXPECT_THAT(notes(ChooseCluster(nodes)), HasSubstr("which is not one of the job's nodes"));
  nodes.torchrun.endpoint = "[::1]:29445";
  EXPECT_EQ(ChooseCluster(nodes).spec.rendezvous_port, 29445);
  for (const std::string bad : {"a:http", "a:70000", ":29400", "a:", "a:1:2:3x"}) {
    nodes.torchrun.endpoint = bad;
    try {
      ChooseCluster(nodes);
      ADD_FAILURE() << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      EXPECT_THAT(e.what(), HasSubstr("--rdzv-endpoint " + bad + ": expected HOST or HOST:PORT"));
    }
  }
  nodes.torchrun.endpoint = "a:29444";
  nodes.master_port = 29501;
  try {
    ChooseCluster(nodes);
    ADD_FAILURE() << "two ports were taken";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("name two ports; give one of them"));
  }
}

// `dtrain doctor --exclude-bad` writes the healthy nodes' addresses; with -c, each keeps what the
// cluster file says of it (env, gpus, its name), and the hostfile's slots.
TEST(ClusterSpec, HostfileNodesKeepTheClusterFilesSettings) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/full.yaml";
  std::ofstream(file) << kFullExample;
  const std::string hosts = dir + "/good.txt";
  std::ofstream(hosts) << "# excluded gpu-b: ...\n10.0.0.11 slots=4  # gpu-a\nextra slots=1\n";
  ClusterChoice choice;
  choice.cluster_file = file;
  choice.hostfile = hosts;
  const ChosenCluster chosen = ChooseCluster(choice);
  ASSERT_EQ(chosen.spec.nodes.size(), 2u);
  const NodeSpec& a = chosen.spec.nodes[0];
  EXPECT_EQ(a.host, "gpu-a");
  EXPECT_EQ(a.address, "10.0.0.11");
  EXPECT_EQ(a.slots, 4);
  EXPECT_EQ(a.gpus.size(), 8u);
  EXPECT_EQ(a.env.at("NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(chosen.spec.nodes[1].host, "extra");  // not in the file: as listed
  EXPECT_TRUE(chosen.spec.nodes[1].env.empty());
  EXPECT_EQ(chosen.spec.ssh.port, 2222);  // the file's ssh settings, as before
}

TEST(ClusterSpec, SmallestLocalFile) {
  ClusterSpec s = ParseClusterText("transport: local\nnodes: [{host: localhost, slots: 4}]\n", "x");
  EXPECT_EQ(s.transport, TransportKind::kLocal);
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].slots, 4);
  EXPECT_EQ(s.nodes[0].address, "localhost");
  EXPECT_EQ(s.rendezvous_port, 29500);
  EXPECT_EQ(s.log_dir, "./dtrain-logs");
  // Also without the transport key: only nodes are required.
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]", "x").transport, TransportKind::kSsh);
}

TEST(ClusterSpec, UnknownKeysAreErrorsWithPosition) {
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nlogdir: x\n"),
              HasSubstr("c.yaml:2:1: unknown key 'logdir' in the cluster file"));
  EXPECT_THAT(ErrorOf("nodes:\n  - host: a\n    slot: 2\n"),
              HasSubstr("c.yaml:3:5: unknown key 'slot' in nodes[0]; expected one of: address"));
  EXPECT_THAT(ErrorOf("ssh: {usr: bob}\nnodes: [{host: a}]\n"),
              HasSubstr("c.yaml:1:7: unknown key 'usr' in ssh"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {comand: [x]}\n"), HasSubstr("c.yaml:2:7:"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nrendezvous: {prt: 1}\n"),
              HasSubstr("unknown key 'prt'"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nexpect: {cudaa: '12'}\n"),
              HasSubstr("unknown key 'cudaa'"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nslurm: {partitio: x}\n"), HasSubstr("unknown key"));
}

TEST(ClusterSpec, WrongTypes) {
  EXPECT_THAT(ErrorOf("nodes:\n  - host: a\n    slots: four\n"),
              HasSubstr("c.yaml:3:12: nodes[0].slots: expected an integer, got 'four'"));
  EXPECT_THAT(ErrorOf("nodes: {host: a}\n"), HasSubstr("c.yaml:1:8: nodes: expected a list"));
  EXPECT_THAT(ErrorOf("nodes: [{host: [a]}]\n"), HasSubstr("nodes[0].host: expected a string"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a, gpus: 3}]\n"), HasSubstr("gpus: expected a list"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a, gpus: [x]}]\n"), HasSubstr("expected an integer"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nenv: [A, B]\n"),
              HasSubstr("c.yaml:2:6: env: expected a map"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nenv: {A: [1]}\n"),
              HasSubstr("env.A: expected a string"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {command: train.py}\n"),
              HasSubstr("job.command: expected a list of strings"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {timeline: maybe}\n"),
              HasSubstr("job.timeline: expected true or false"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {horovod: yes-please}\n"),
              HasSubstr("job.horovod: expected true or false"));
  EXPECT_THAT(ErrorOf("transport: rsh\nnodes: [{host: a}]\n"),
              HasSubstr("c.yaml:1:12: transport: expected ssh, local or slurm, got 'rsh'"));
  EXPECT_THAT(ErrorOf("ssh: {host_key_policy: yolo}\nnodes: [{host: a}]\n"),
              HasSubstr("expected strict or accept-new"));
  EXPECT_THAT(ErrorOf("- a\n- b\n"), HasSubstr("c.yaml:1:1: the cluster file: expected a map"));
}

TEST(ClusterSpec, MissingNodesDuplicatesAndRanges) {
  EXPECT_THAT(ErrorOf("name: x\n"), HasSubstr("c.yaml:1:1: missing 'nodes'"));
  EXPECT_THAT(ErrorOf("nodes: []\n"), HasSubstr("nodes: expected at least one node"));
  EXPECT_THAT(ErrorOf("nodes:\n  - slots: 2\n"), HasSubstr("c.yaml:2:5: nodes[0]: missing 'host'"));
  EXPECT_THAT(ErrorOf("nodes:\n  - host: a\n  - host: b\n  - host: a\n"),
              HasSubstr("c.yaml:4:11: duplicate host 'a' (first listed at line 2)"));
  EXPECT_THAT(ErrorOf("nodes:\n  - host: a\n    slots: 0\n"),
              HasSubstr("c.yaml:3:12: nodes[0].slots: expected an integer from 1 to"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a, slots: -3}]\n"), HasSubstr("slots"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nrendezvous: {port: 70000}\n"),
              HasSubstr("c.yaml:2:20: rendezvous.port (a TCP port): expected an integer from 1 to "
                        "65535, got 70000"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nssh: {port: 0}\n"), HasSubstr("ssh.port (a TCP port)"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nssh: {port: twenty}\n"), HasSubstr("ssh.port"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a, gpus: [0, 0]}]\n"), HasSubstr("GPU 0 listed twice"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\nnodes: [{host: b}]\n"),
              HasSubstr("duplicate key 'nodes'"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {max_restarts: -1}\n"), HasSubstr("max_restarts"));
  // job.node_timeout: 0 turns the watch off, as --node-timeout 0 does; 1 s is too short.
  EXPECT_EQ(
      ParseClusterText("nodes: [{host: a}]\njob: {node_timeout: 0}\n", "x").job.node_timeout_s, 0);
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {node_timeout: 1}\n"),
              HasSubstr("job.node_timeout: expected 0 (off) or seconds >= 2"));
  // The straggler watch: a factor above 1 or 0 (off), report or leave.
  const ClusterSpec straggler = ParseClusterText(
      "nodes: [{host: a}]\njob: {straggler_factor: 2.5, on_straggler: leave}\n", "x");
  EXPECT_EQ(straggler.job.straggler_factor, 2.5);
  EXPECT_EQ(straggler.job.on_straggler, "leave");
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\n", "x").job.straggler_factor, 1.5);
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\n", "x").job.on_straggler, "report");
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\njob: {straggler_factor: 0}\n", "x")
                .job.straggler_factor,
            0);
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {straggler_factor: 1}\n"),
              HasSubstr("c.yaml:2:25: job.straggler_factor: expected 0 (off) or a factor above 1"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {straggler_factor: fast}\n"),
              HasSubstr("job.straggler_factor: expected 0 (off) or a factor above 1"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {on_straggler: stop}\n"),
              HasSubstr("job.on_straggler: expected report or leave, got 'stop'"));
  // job.hold_back: seconds an earlier job's quarantine counts (a day by default; 0: none).
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\n", "x").job.hold_back_s, 86400);
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\njob: {hold_back: 0}\n", "x").job.hold_back_s, 0);
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\njob: {hold_back: 3600}\n", "x").job.hold_back_s,
            3600);
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {hold_back: -5}\n"), HasSubstr("job.hold_back"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}]\njob: {hold_back: a day}\n"),
              HasSubstr("c.yaml:2:18: job.hold_back"));
}

TEST(ClusterSpec, BrokenYamlAndEmptyFiles) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("c.yaml:1:1: the cluster file is empty"));
  EXPECT_THAT(ErrorOf("# only a comment\n"), HasSubstr("empty"));
  EXPECT_THAT(ErrorOf("nodes: [{host: a}\n"), HasSubstr("c.yaml:2:1: not valid YAML"));
  EXPECT_THAT(ErrorOf("nodes:\n\t- host: a\n"), HasSubstr("c.yaml:2:"));
  EXPECT_THAT(ErrorOf("a: b: c\n"), HasSubstr("not valid YAML"));
}

// Every prefix of a valid file, and every single-byte corruption of it, either parses or gives
// a positioned usage error: nothing crashes and nothing else is thrown.
TEST(ClusterSpec, NoInputCrashes) {
  const std::string full = kFullExample;
  int errors = 0;
  for (size_t n = 0; n <= full.size(); ++n) {
    std::string message = ErrorOf(full.substr(0, n));
    if (!message.empty()) {
      ++errors;
      EXPECT_THAT(message, HasSubstr("c.yaml:")) << "prefix " << n;
    }
  }
  for (size_t i = 0; i < full.size(); i += 7) {
    for (char c : std::string("{[:-'\"\t\n#&*!|>%@`,]}")) {
      std::string broken = full;
      broken[i] = c;
      std::string message = ErrorOf(broken);
      if (!message.empty()) {
        EXPECT_THAT(message, HasSubstr("c.yaml")) << broken;
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(ClusterSpec, FileErrorsNameTheFile) {
  try {
    ParseClusterFile("/nonexistent/cluster.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/cluster.yaml: cannot read"));
  }
  const std::string path = ::testing::TempDir() + "/bad-cluster.yaml";
  std::ofstream(path) << "nodes:\n  - host: a\n    slots: 0\n";
  try {
    ParseClusterFile(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ":3:12:"));
  }
}

TEST(ClusterSpec, TemplatesParse) {
  for (const std::string& name : ClusterTemplateNames()) {
    std::string_view text = ClusterTemplate(name);
    ClusterSpec s = ParseClusterText(std::string(text), name);
    EXPECT_FALSE(s.nodes.empty()) << name;
    EXPECT_EQ(TransportName(s.transport), name);
  }
  EXPECT_THROW(ClusterTemplate("pbs"), Error);
}

TEST(ClusterSpec, DefaultLocalClusterFollowsTheEnvironment) {
  ::unsetenv("NPROC_PER_NODE");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ClusterSpec s = DefaultLocalCluster();
  EXPECT_EQ(s.transport, TransportKind::kLocal);
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].slots, 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "2,5,7", 1);
  EXPECT_EQ(DefaultLocalCluster().nodes[0].slots, 3);
  // CUDA stops at the first empty or negative entry: "0,,1" and "1,-1,2" show one GPU.
  ::setenv("CUDA_VISIBLE_DEVICES", "0,,1", 1);
  EXPECT_EQ(DefaultLocalCluster().nodes[0].slots, 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "1,-1,2", 1);
  EXPECT_EQ(DefaultLocalCluster().nodes[0].slots, 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
  EXPECT_EQ(DefaultLocalCluster().nodes[0].slots, 1) << "none visible: one CPU rank";
  ::setenv("NPROC_PER_NODE", "5", 1);
  EXPECT_EQ(DefaultLocalCluster().nodes[0].slots, 5);
  ::setenv("NPROC_PER_NODE", "two", 1);
  EXPECT_THROW(DefaultLocalCluster(), Error);
  ::unsetenv("NPROC_PER_NODE");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace dtrain
