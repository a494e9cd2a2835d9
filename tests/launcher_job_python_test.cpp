// Which Python serves the job's TCPStore: the job's own, seen through what users put in front of
// it (assignments, env, runners, a shell's -c script), and none when it cannot be seen.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_store.h"

namespace dtrain {
namespace {

std::string Python(const std::vector<std::string>& command, const std::string& cluster_python = "") {
  ClusterSpec spec;
  spec.python = cluster_python;
  return JobPython(command, spec);
}

TEST(JobPython, TheProgramItselfOrTheClusterFilesPython) {
  EXPECT_EQ(Python({"python", "train.py"}), "python");
  EXPECT_EQ(Python({"/venv/bin/python3.11", "-m", "train"}), "/venv/bin/python3.11");
  EXPECT_EQ(Python({"/opt/py/bin/interp", "train.py"}, "/opt/py/bin/interp"),
            "/opt/py/bin/interp");
  EXPECT_EQ(Python({"pythonista", "x"}), "");
  EXPECT_EQ(Python({"./train.sh"}), "");
  EXPECT_EQ(Python({}), "");
}

TEST(JobPython, SeenThroughAssignmentsEnvAndRunners) {
  EXPECT_EQ(Python({"env", "-u", "DISPLAY", "OMP_NUM_THREADS=4", "python3", "train.py"}),
            "python3");
  EXPECT_EQ(Python({"NCCL_DEBUG=INFO", "python", "train.py"}), "python");
  EXPECT_EQ(Python({"numactl", "--cpunodebind=0", "--membind=0", "python3", "t.py"}), "python3");
  EXPECT_EQ(Python({"taskset", "-c", "0-7", "/venv/bin/python", "t.py"}), "/venv/bin/python");
  EXPECT_EQ(Python({"timeout", "3600", "nice", "-n", "5", "python", "t.py"}), "python");
  EXPECT_EQ(Python({"uv", "run", "python", "t.py"}), "python");
  // A runner in front of something else: no Python to be seen.
  EXPECT_EQ(Python({"nice", "-n", "5", "./train.sh"}), "");
  // A python* word that is an argument of another program is not the job's Python.
  EXPECT_EQ(Python({"./run.sh", "--interpreter", "python3"}), "");
}

TEST(JobPython, SeenInsideAShellsScript) {
  EXPECT_EQ(Python({"sh", "-c", "cd /work && exec python3 train.py --lr 0.1"}), "python3");
  EXPECT_EQ(Python({"/bin/bash", "-lc", "source env.sh; OMP_NUM_THREADS=2 python train.py"}),
            "python");
  EXPECT_EQ(Python({"bash", "--noprofile", "-c", "set -e\n/venv/bin/python3 'train.py'"}),
            "/venv/bin/python3");
  EXPECT_EQ(Python({"sh", "-c", "echo \"python is not run here\" && ./train.sh"}), "");
  EXPECT_EQ(Python({"sh", "-c", "ls | grep python"}), "");
  EXPECT_EQ(Python({"sh", "run.sh"}), "");
  // Quotes and escapes keep a word whole: the program here is 'my python', not python.
  EXPECT_EQ(Python({"sh", "-c", "'my python' train.py"}), "");
  EXPECT_EQ(Python({"sh", "-c", "my\\ python train.py || python3 fallback.py"}), "python3");
  // Nested: a shell running a shell.
  EXPECT_EQ(Python({"sh", "-c", "bash -c 'python3.12 t.py'"}), "python3.12");
}

TEST(JobPython, TheStoreCommandUsesThePythonFound) {
  ClusterSpec spec;
  const auto command =
      JobStoreCommand({"sh", "-c", "exec python3 t.py"}, spec, "10.0.0.1", 29511);
  ASSERT_EQ(command.size(), 5u);
  EXPECT_EQ(command[0], "python3");
  EXPECT_EQ(command[1], "-c");
  EXPECT_EQ(command[3], "10.0.0.1");
  EXPECT_EQ(command[4], "29511");
  EXPECT_TRUE(JobStoreCommand({"sh", "-c", "./train.sh"}, spec, "h", 1).empty());
  EXPECT_EQ(JobStoreCommand({"/opt/dtrain-clip", "train"}, spec, "h", 1).at(1), "store");
}

}  // namespace
}  // namespace dtrain
