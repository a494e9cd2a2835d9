// torchrun and horovodrun users at home: each numbered item tried the
// way a new user types it, through the built dtrain binary on this machine. The SSH halves
// (-x, -H, --hostfile, dtrain-clip on nodes, stderr and 127 over SSH) are in ssh_ux_test.cpp.
#include <sys/stat.h>

#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "doctor/checks.h"
#include "launcher/ssh/ssh_session.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/shell_run.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using testing::DtrainProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;
using testing::WriteFile;

const std::string kPython = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/python3";

// 1. The first word that is not an option of dtrain starts the rank command, `--` or not.
TEST(LaunchUx, CommandWithoutDoubleDashIsTheRankCommand) {
  TempDir dir;
  auto run = RunDtrain({"launch", "--job", "a", "sh", "-c", "echo one"}, dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, "[localhost:0] one\n");
  // The command's own options (--lr) are its own, with and without `--`.
  for (bool dashes : {false, true}) {
    std::vector<std::string> args = {"launch", "--nproc-per-node", "2", "--job",
                                     dashes ? "d" : "n"};
    if (dashes) args.push_back("--");
    for (const char* word : {"sh", "-c", "echo \"$RANK $*\"", "train.py", "--lr", "0.1"})
      args.push_back(word);
    run = RunDtrain(args, dir.path());
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/" + (dashes ? "d" : "n") + "/rank-1.log"),
              "1 --lr 0.1\n");
  }
}

// 2. Two local torch.distributed jobs at once, neither given a port: both succeed, on different
// ports; MASTER_PORT in the caller's environment and --master-port are honoured.
TEST(LaunchUx, ConcurrentLocalTorchJobsNeverCollide) {
  struct stat st;
  if (::stat(kPython.c_str(), &st) != 0) GTEST_SKIP() << "no " << kPython;
  TempDir dir;
  WriteFile(dir.path() + "/ddp.py",
            "import os, time, torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            "t = torch.ones(1) * (dist.get_rank() + 1)\n"
            "dist.all_reduce(t)\n"
            "time.sleep(2)  # both jobs' stores are up at the same time\n"
            "dist.barrier()\n"
            "print('port', os.environ['MASTER_PORT'], 'sum', int(t.item()))\n"
            "dist.destroy_process_group()\n");
  DtrainProcess a({"launch", "-np", "2", "--job", "a", kPython, "ddp.py"}, dir.path());
  DtrainProcess b({"launch", "-np", "2", "--job", "b", kPython, "ddp.py"}, dir.path());
  ASSERT_EQ(a.Wait(180), 0) << a.err();
  ASSERT_EQ(b.Wait(180), 0) << b.err();
  const std::string log_a = ReadFile(dir.path() + "/dtrain-logs/a/rank-0.log");
  const std::string log_b = ReadFile(dir.path() + "/dtrain-logs/b/rank-0.log");
  EXPECT_THAT(log_a, HasSubstr(" sum 3"));
  EXPECT_THAT(log_b, HasSubstr(" sum 3"));
  EXPECT_NE(log_a, log_b);  // "port P sum 3": different ports
  EXPECT_THAT(a.err(), HasSubstr("a free port, held until rank 0 binds it"));

  auto run = RunDtrain({"launch", "--job", "env", "sh", "-c", "echo $MASTER_ADDR:$MASTER_PORT"},
                       dir.path(), {"MASTER_PORT=29777", "MASTER_ADDR=127.0.0.2"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, "[localhost:0] 127.0.0.2:29777\n");
  run = RunDtrain(
      {"launch", "--master-port", "29778", "--job", "flag", "sh", "-c", "echo $MASTER_PORT"},
      dir.path(), {"MASTER_PORT=29777"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, "[localhost:0] 29778\n");
}

// 4. The banner names the cluster file and why there are N ranks per node; NPROC_PER_NODE that
// a ./cluster.yaml overrides is called out; a file without transport: on this machine is local.
TEST(LaunchUx, BannerSaysWhichClusterFileAndWhyThatManyRanks) {
  TempDir dir;
  WriteFile(dir.path() + "/cluster.yaml", "nodes: [{host: localhost, slots: 2}]\n");
  auto run = RunDtrain({"launch", "--job", "c", "true"}, dir.path(), {"NPROC_PER_NODE=3"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("2 rank(s) on 1 node(s) (local)"));  // no SSH to localhost
  EXPECT_THAT(run.err, HasSubstr("cluster file ./cluster.yaml"));
  EXPECT_THAT(run.err, HasSubstr("ranks: 2 per node (slots in ./cluster.yaml)"));
  EXPECT_THAT(run.err, HasSubstr("NPROC_PER_NODE=3 is not used"));
  EXPECT_THAT(run.err, HasSubstr("--nproc-per-node 3"));
  ::unlink((dir.path() + "/cluster.yaml").c_str());
  run = RunDtrain({"launch", "--job", "e", "true"}, dir.path(), {"NPROC_PER_NODE=3"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("no cluster file"));
  EXPECT_THAT(run.err, HasSubstr("ranks: 3 per node (NPROC_PER_NODE=3)"));
}

// 5. Unknown options and commands are named, with a suggestion; `dtrain help CMD` works.
TEST(LaunchUx, UnknownOptionsAndCommandsSayWhatToDo) {
  TempDir dir;
  auto run = RunDtrain({"launch", "--rdzv-timeout", "2", "--", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("unknown option --rdzv-timeout"));
  EXPECT_THAT(run.err, Not(HasSubstr("argument was not expected")));
  // horovodrun's options dtrain has no use for say what to use instead.
  run = RunDtrain({"launch", "--mpi", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("dtrain starts every rank itself and serves Horovod's Gloo"));
  run = RunDtrain({"launch", "--mpi-args=--map-by ppr:6:node", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("dtrain starts every rank itself and serves Horovod's Gloo"));
  // horovodrun's old name of --log-without-timestamp is still read, as horovodrun reads it.
  run = RunDtrain({"launch", "-H", "localhost:1", "--log-dir", dir.path(), "--job", "hide",
                   "--log-hide-timestamp", "--", "sh", "-c", "echo hide=$HOROVOD_LOG_HIDE_TIME"},
                  dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(ReadFile(dir.path() + "/hide/rank-0.log"), HasSubstr("hide=1"));
  run = RunDtrain({"launch", "-cb"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("dtrain doctor shows every node's Horovod build"));
  run = RunDtrain({"launch", "--hierarchical-allreduce", "--no-hierarchical-allreduce", "true"},
                  dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("say opposite things"));
  run = RunDtrain({"launch", "--timeline", "--timeline-filename", "t.json", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("give one of them"));
  WriteFile(dir.path() + "/horovod.yaml", "params:\n  fusion_threshold_mb: lots\n");
  run = RunDtrain({"launch", "--config-file", "horovod.yaml", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("horovod.yaml:2:24: params.fusion_threshold_mb: expected a whole "
                                 "number >= 0, got 'lots'"));
  WriteFile(dir.path() + "/horovod.yaml", "timeline:\n  filename: t.json\n");
  run = RunDtrain({"launch", "--config-file", "horovod.yaml", "--timeline", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("HOROVOD_TIMELINE=t.json (from --timeline-filename, a "
                                 "--config-file's timeline.filename"));
  run =
      RunDtrain({"launch", "--autotune-log-file", "a.csv", "--num-proc", "1", "true"}, dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--autotune-log-file is not used without --autotune"));
  run = RunDtrain({"launch", "--nproc-per-nod", "2", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("did you mean --nproc-per-node?"));
  run = RunDtrain({"lauch"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("unknown command 'lauch' (did you mean launch?)"));
  run = RunDtrain({"logs", "--tial", "3"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("did you mean --tail?"));
  run = RunDtrain({"help", "launch"}, dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("--master-port"));
  // torchrun's underscore spelling is accepted.
  run = RunDtrain({"launch", "--nproc_per_node=2", "--job", "u", "true"}, dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  // init refuses to overwrite with status 2, as documented.
  ASSERT_EQ(RunDtrain({"init"}, dir.path()).status, 0);
  run = RunDtrain({"init"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("--force"));
}

// 6. Range errors in words.
TEST(LaunchUx, RangeErrorsAreReadable) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"launch", "--nproc-per-node", "0", "true"},
        {"launch", "-np", "0", "true"},
        {"launch", "--master-port", "70000", "true"},
        {"launch", "--straggler-factor", "-1", "true"},
        {"launch", "--straggler-factor", "1", "true"},
        {"logs", "--tail", "-1"}}) {
    auto run = RunDtrain(args, dir.path());
    EXPECT_EQ(run.status, 2) << args[1];
    EXPECT_THAT(run.err, Not(HasSubstr("179769"))) << run.err;
    EXPECT_THAT(run.err, Not(HasSubstr("0.000000"))) << run.err;
    EXPECT_THAT(run.err, HasSubstr("expected")) << run.err;
    EXPECT_THAT(run.err, HasSubstr("--help")) << run.err;
  }
}

// 7. The ssh-keyscan hint carries -p for a node on another port.
TEST(LaunchUx, KeyscanHintCarriesThePort) {
  EXPECT_EQ(KeyscanCommand("10.0.0.5", 22), "ssh-keyscan 10.0.0.5");
  EXPECT_EQ(KeyscanCommand("10.0.0.5", 2222), "ssh-keyscan -p 2222 10.0.0.5");
  NodeFacts node;
  node.host = "gpu-b";
  node.address = "10.0.0.5";
  node.reached = false;
  node.error = "node gpu-b (10.0.0.5): ssh: host key for 10.0.0.5 is not in known_hosts";
  node.failure = ClassifyReachError(node.error);
  const std::vector<Finding> findings = CheckReach({node}, 2222);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_THAT(findings[0].remedy, HasSubstr("ssh-keyscan -p 2222 10.0.0.5"));
}

// 8. A network failure's remedy names the address and port and how to check them.
TEST(LaunchUx, NetworkFailureRemedyNamesAddressAndPort) {
  NodeFacts node;
  node.host = "gpu-c";
  node.address = "10.0.0.6";
  node.reached = false;
  node.error = "node gpu-c (10.0.0.6): ssh: cannot connect to port 22: No route to host";
  node.failure = ClassifyReachError(node.error);
  const std::vector<Finding> findings = CheckReach({node}, 22);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_THAT(findings[0].remedy, HasSubstr("nc -vz 10.0.0.6 22"));
  EXPECT_THAT(findings[0].remedy, HasSubstr("ip route get 10.0.0.6"));
  EXPECT_THAT(findings[0].remedy, Not(HasSubstr("sh -s")));
}

// 9 (local half). -np, -H localhost:N, a hostfile, -x and .dtrain_env.
TEST(LaunchUx, MpirunAndHorovodrunOptionsOnThisMachine) {
  TempDir dir;
  auto run =
      RunDtrain({"launch", "-np", "3", "--job", "np", "sh", "-c", "echo $WORLD_SIZE"}, dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/np/rank-2.log"), "3\n");
  run =
      RunDtrain({"launch", "-H", "localhost:2", "--job", "h", "sh", "-c", "echo $LOCAL_WORLD_SIZE"},
                dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("(local)"));
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/h/rank-1.log"), "2\n");
  WriteFile(dir.path() + "/hosts", "# DeepSpeed style\nlocalhost slots=4\n");
  run = RunDtrain(
      {"launch", "--hostfile", "hosts", "-np", "3", "--job", "hf", "sh", "-c", "echo $WORLD_SIZE"},
      dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/hf/rank-0.log"), "3\n");
  WriteFile(dir.path() + "/.dtrain_env", "# every job\nFROM_FILE=a b 'c'\n");
  run = RunDtrain({"launch", "-x", "MINE", "-x", "SET=x=1", "--job", "x", "sh", "-c",
                   "printf '%s|%s|%s' \"$MINE\" \"$SET\" \"$FROM_FILE\""},
                  dir.path(), {"MINE=it's $(here)"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/x/rank-0.log"), "it's $(here)|x=1|a b 'c'");
  run = RunDtrain({"launch", "-x", "SURELY_UNSET_VAR_16", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("-x SURELY_UNSET_VAR_16=VALUE"));
  run = RunDtrain({"launch", "-H", "localhost:2", "-np", "5", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("more ranks than the 2 slot(s)"));
}

// 9b. torchrun's training_script: a first word ending in .py runs with the job's Python (python3,
// or the cluster file's python:), -m runs a module, --no-python runs the file as a program.
TEST(LaunchUx, ScriptsAndModulesRunWithTheJobsPythonAsTorchrunRunsThem) {
  TempDir dir;
  WriteFile(dir.path() + "/show.py",
            "import os, sys\nprint(os.environ['RANK'], __name__, sys.argv[1:])\n");
  ::mkdir((dir.path() + "/pkg").c_str(), 0755);
  WriteFile(dir.path() + "/pkg/__init__.py", "");
  WriteFile(dir.path() + "/pkg/show.py", ReadFile(dir.path() + "/show.py"));
  const std::vector<std::string> no_store = {"-x", "TORCHELASTIC_USE_AGENT_STORE=False"};
  auto launch = [&](const std::string& job, std::vector<std::string> words) {
    std::vector<std::string> args = {"launch", "--nproc_per_node=2", "--job", job};
    args.insert(args.end(), no_store.begin(), no_store.end());
    args.insert(args.end(), words.begin(), words.end());
    return RunDtrain(args, dir.path());
  };
  auto run = launch("script", {"show.py", "--lr", "1"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("show.py runs as `python3 show.py`, as torchrun runs a script"));
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/script/rank-1.log"), "1 __main__ ['--lr', '1']\n");
  run = launch("module", {"-m", "pkg.show", "--lr", "1"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("pkg.show runs as `python3 -m pkg.show`"));
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/module/rank-1.log"), "1 __main__ ['--lr', '1']\n");
  // The cluster file's python: is the job's Python.
  WriteFile(dir.path() + "/py", "#!/bin/sh\necho \"via py: $1\"\nexec python3 \"$@\"\n");
  ::chmod((dir.path() + "/py").c_str(), 0755);
  WriteFile(dir.path() + "/cluster.yaml",
            "nodes: [{host: localhost, slots: 1}]\npython: " + dir.path() + "/py\n");
  run = launch("own", {"show.py"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/own/rank-0.log"),
            "via py: show.py\n0 __main__ []\n");
  ::unlink((dir.path() + "/cluster.yaml").c_str());
  // --no-python: the file is the program (here a shell script), as under torchrun.
  WriteFile(dir.path() + "/tool.py", "#!/bin/sh\necho \"a program $RANK\"\n");
  ::chmod((dir.path() + "/tool.py").c_str(), 0755);
  run = launch("program", {"--no-python", "./tool.py"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("runs as")));
  EXPECT_EQ(ReadFile(dir.path() + "/dtrain-logs/program/rank-1.log"), "a program 1\n");
  run = launch("both", {"-m", "--no-python", "pkg.show"});
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("-m and --no-python cannot be used together"));
  run = RunDtrain({"launch", "-m"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("-m: name the module to run"));
}

// 10. Rank stdout on dtrain's stdout, rank stderr on dtrain's stderr, both in the log;
// --console (or torchrun's --redirects and --tee) narrows the console; command not found is 127;
// completion sources in bash.
TEST(LaunchUx, StderrSeparateConsoleChoiceAnd127AndCompletion) {
  TempDir dir;
  auto run =
      RunDtrain({"launch", "--job", "s", "sh", "-c", "echo out; echo Traceback >&2"}, dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, "[localhost:0] out\n");
  EXPECT_THAT(run.err, HasSubstr("[localhost:0] Traceback\n"));
  const std::string log = ReadFile(dir.path() + "/dtrain-logs/s/rank-0.log");
  EXPECT_THAT(log, HasSubstr("out\n"));
  EXPECT_THAT(log, HasSubstr("Traceback\n"));
  run = RunDtrain(
      {"launch", "--console", "stderr", "--job", "s2", "sh", "-c", "echo out; echo err >&2"},
      dir.path());
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, HasSubstr("[localhost:0] err\n"));
  // torchrun's --tee adds a redirected stream back to the console: alone it changes nothing.
  run = RunDtrain(
      {"launch", "-r", "3", "-t", "1", "--job", "s3", "sh", "-c", "echo out; echo err >&2"},
      dir.path());
  EXPECT_EQ(run.out, "[localhost:0] out\n");
  EXPECT_THAT(run.err, Not(HasSubstr("] err")));
  run = RunDtrain({"launch", "--tee", "1", "--job", "s4", "sh", "-c", "echo out; echo err >&2"},
                  dir.path());
  EXPECT_EQ(run.out, "[localhost:0] out\n");
  EXPECT_THAT(run.err, HasSubstr("[localhost:0] err\n"));
  run = RunDtrain({"launch", "--console", "none", "--tee", "1", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("give one of them"));
  run = RunDtrain({"launch", "--job", "nf", "no-such-program-16"}, dir.path());
  EXPECT_EQ(run.status, 127);

  const std::string script = dir.path() + "/dtrain.bash";
  run = RunDtrain({"completion", "bash"}, dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  WriteFile(script, run.out);
  const std::string complete =
      "bash -c 'source " + script +
      " && COMP_WORDS=(dtrain launch --nproc) && COMP_CWORD=2 && _dtrain && "
      "echo \"${COMPREPLY[*]}\" && COMP_WORDS=(dtrain la) && COMP_CWORD=1 && _dtrain && "
      "echo \"${COMPREPLY[*]}\" && COMP_WORDS=(dtrain launch --on-stall \"\") && COMP_CWORD=3 && "
      "_dtrain && echo \"${COMPREPLY[*]}\" && COMP_WORDS=(dtrain launch --numa-binding \"\") && "
      "COMP_CWORD=3 && _dtrain && echo \"${COMPREPLY[*]}\"'";
  const testing::ShellRun completed = testing::RunShell(complete);
  EXPECT_TRUE(completed.status.ok()) << completed.out;
  EXPECT_EQ(completed.out,
            "--nproc-per-node\nlaunch\nreport stop\nnode socket exclusive core-complex\n");
  for (const char* shell : {"zsh", "fish"}) {
    run = RunDtrain({"completion", shell}, dir.path());
    EXPECT_EQ(run.status, 0);
    EXPECT_THAT(run.out, HasSubstr("master-port")) << shell;
    const std::string file = dir.path() + "/dtrain." + shell;
    WriteFile(file, run.out);
    const testing::ShellRun parsed = testing::RunShell(std::string(shell) + " -n " + file);
    EXPECT_TRUE(parsed.status.ok()) << shell << " -n: " << parsed.out;
  }
  // fish completes for real: a command, an option, an option's values.
  const testing::ShellRun fish =
      testing::RunShell("fish -c 'source " + dir.path() +
                        "/dtrain.fish; complete -C \"dtrain la\"; "
                        "complete -C \"dtrain launch --on-stal\"; complete -C \"dtrain launch "
                        "--on-stall \"' | cut -f1");
  EXPECT_TRUE(fish.status.ok()) << fish.out;
  EXPECT_EQ(fish.out, "launch\n--on-stall\nreport\nstop\n");
}

}  // namespace
}  // namespace dtrain
