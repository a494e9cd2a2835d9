// Test support: Ctrl-C while `dtrain doctor` runs one of its test jobs (--bandwidth, --compute)
// on namespace nodes. One node's rank of the job stopped with SIGSTOP (a node that stops
// answering mid-test), then SIGINT to the doctor: what it must and must not report.
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/doctor_run.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain::test {

// Node `node`'s `dtrain-clip SUBCOMMAND ...` process itself (argv[0] a dtrain-clip, not the
// timeout or shell around it): its pid, or 0.
inline int ClipProcess(const SshTestCluster& cluster, int node, const std::string& subcommand) {
  const std::string args = " " + subcommand + " ";
  for (const std::string& p : cluster.NodeProcesses(node)) {  // "PID ARGV0 ARGS..."
    const size_t argv0 = p.find(' ') + 1;
    const size_t argv0_end = p.find(' ', argv0);
    const std::string program = p.substr(argv0, argv0_end - argv0);
    if (program.size() >= 11 && program.compare(program.size() - 11, 11, "dtrain-clip") == 0 &&
        p.compare(argv0_end, args.size(), args) == 0) {
      return std::stoi(p.substr(0, argv0 - 1));
    }
  }
  return 0;
}

// Stops node1's `dtrain-clip SUBCOMMAND` with SIGSTOP once it runs, lets the others go on for
// two seconds (node0's --compute check ends meanwhile), sends the doctor SIGINT, and checks that
// the test `test` ("bandwidth", "compute") was cut short and judged in no part: exit 128+SIGINT
// within 5 s (the job's stop: SIGTERM, SIGCONT, SIGKILL after its grace period), JSON
// "interrupted", none of the test's figures, one warning naming no node and no error, `hostfile`
// not written, nothing left on the first `nodes` nodes.
inline void ExpectTestCutShortByCtrlC(const SshTestCluster& cluster, int nodes,
                                      testing::DtrainProcess& doctor, const std::string& test,
                                      const std::string& subcommand, const std::string& hostfile) {
  int stopped = 0;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const int pid = ClipProcess(cluster, 1, subcommand);
        if (pid > 0 && kill(pid, SIGSTOP) == 0) stopped = pid;
        return stopped > 0;
      },
      60))
      << doctor.err();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto signalled = std::chrono::steady_clock::now();
  doctor.Signal(SIGINT);
  ASSERT_GE(doctor.Wait(20), 0) << doctor.err();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(), 5)
      << doctor.err();
  EXPECT_EQ(doctor.exit_status().signal, 0) << doctor.err();  // it exited, not killed
  EXPECT_EQ(doctor.exit_status().code, 128 + SIGINT) << doctor.err();
  const nlohmann::json doc = nlohmann::json::parse(doctor.out(), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << doctor.out() << doctor.err();
  EXPECT_EQ(doc["interrupted"], (nlohmann::json{{"signal", "SIGINT"}, {"during", "--" + test}}));
  EXPECT_FALSE(doc.contains(test)) << "nothing of the cut-short test is reported as a result";
  for (const auto& f : doc["findings"]) EXPECT_NE(f["severity"], "error") << f.dump();
  DoctorRun run;
  run.doc = doc;
  const auto cut = Findings(run, test, "warning");
  ASSERT_EQ(cut.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(cut[0]["message"],
            "--" + test + " was cut short by the interrupt: no node's result was judged");
  EXPECT_TRUE(cut[0]["nodes"].empty());
  EXPECT_NE(doctor.err().find("dtrain doctor: interrupted by SIGINT during --" + test + " after "),
            std::string::npos)
      << doctor.err();
  EXPECT_FALSE(std::filesystem::exists(hostfile));
  EXPECT_EQ(cluster.LeftoverProcesses(nodes, 5), "") << "the stopped rank was killed";
}

}  // namespace dtrain::test
