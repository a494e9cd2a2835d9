// Heartbeat: what this rank is doing, published cheaply for `dtrain launch`'s stall watch and
// `dtrain status`, and dtrain-clip's own stall inspector (Horovod's is the model).
//
// The training loop and the communicators only store into memory under a mutex held for a few
// stores (no collective, no file I/O on the step's path). A background thread, every
// min(2 s, stall timeout / 5):
//  - rewrites $DTRAIN_LOG_DIR/heartbeat/rank-R.txt through a temporary file and rename (no
//    fsync: a reader on the node needs the page cache, not the disk), "key value" lines:
//    pid, rank, step, activity, activity_s, collective, collective_seq, collective_bytes,
//    collective_set, collective_what, collective_state (waiting|done), collective_s, missing,
//    and with TimeSteps(true) step_s and step_waited_s (the straggler watch's figures);
//  - publishes "heartbeat/R" = "step activity wall_us" to the rendezvous store (one small set);
//  - for a collective this rank has waited in for half the stall timeout, marks itself entered
//    ("stall/<set>/<seq>/R") and reads which members have not: those are "missing", printed once
//    as a warning when the stall timeout passes, and named by the error the collective turns
//    into when the communicator's own timeout ends it.
// It keeps its own bill (Cost()): time spent in its setters on the step's path and the writer
// thread's CPU time, which dtrain-clip's end metrics report (bench/heartbeat_cost.sh reads them).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dtrain::clip {

// What the heartbeat has cost this process so far.
struct HeartbeatCost {
  double path_ms = 0;  // inside SetStep/SetActivity/Enter/LeaveCollective, lock waits included
  double writer_cpu_ms = 0;  // the writer thread's CPU time (file, store, inspector)
  int64_t beats = 0;         // the writer's rounds
};

class Heartbeat {
 public:
  Heartbeat() = default;
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Starts the writer. `dir` "" = no file; `store` null = no store checks. `stall_timeout_s`
  // 0: no inspector.
  void Start(const std::string& dir, int rank, int world_size,
             c10::intrusive_ptr<c10d::Store> store, double stall_timeout_s);
  void Stop();

  // A training step begins; SetStep (its end) adds its time to step_s. Collective waits in
  // between (Waited) add to step_waited_s.
  void BeginStep();
  void SetStep(int64_t step);
  // Whether step_s and step_waited_s are written: only where a collective's wait blocks the host
  // (Gloo); on NCCL the host goes on and the GPU's stream waits, so the host sees no wait.
  void TimeSteps(bool on);
  // The host was blocked for `seconds` waiting for a collective's result.
  void Waited(double seconds);
  void SetActivity(const char* activity);  // DATA, FORWARD, BACKWARD, OPTIMIZER, EVAL...

  // A collective on the communicator `set` (its members' global ranks; empty = the world):
  // Enter returns its sequence number on that set; Leave when its result is in.
  int64_t EnterCollective(const std::string& set, const std::vector<int>& members, const char* name,
                          int64_t bytes, const std::string& what);
  void LeaveCollective(const std::string& set, int64_t seq);

  // "ALLREDUCE #812 (gradients: gradient buffer 2, 24 MiB) on rank 3: waited 600 s; rank 2 has
  // not entered it: last activity DATA at step 406, 312 s ago" for the collective `seq` on `set`
  // (asks the store now); for the error of a collective that timed out.
  std::string DescribeStall(const std::string& set, int64_t seq);

  HeartbeatCost Cost() const;

 private:
  struct Collective {
    std::string set;
    std::vector<int> members;
    const char* name = "";
    int64_t seq = 0;
    int64_t bytes = 0;
    std::string what;
    std::chrono::steady_clock::time_point started, ended;
    bool waiting = false;
    bool marked = false;  // this rank told the store it entered
    bool warned = false;  // the stall warning was printed
    std::string missing;  // "2,5" as the store said last
  };

  void Loop();
  void WriteFile();
  void Inspect();
  std::string MissingRanks(Collective& c);
  std::string LastActivityOf(int rank);
  std::string Describe(const Collective& c);

  std::mutex mu_;
  int64_t step_ = 0;
  const char* activity_ = "START";
  std::chrono::steady_clock::time_point activity_since_ = std::chrono::steady_clock::now();
  std::vector<Collective> in_flight_;  // oldest first
  Collective last_;                    // the latest one, finished or not
  bool has_last_ = false;
  std::vector<std::pair<std::string, int64_t>> seqs_;  // set -> last sequence number
  bool time_steps_ = false;
  bool in_step_ = false;
  std::chrono::steady_clock::time_point step_began_;
  double steps_s_ = 0;         // inside the steps done
  double steps_waited_s_ = 0;  // of that, waiting for collectives
  double this_step_waited_s_ = 0;

  std::string dir_;
  int rank_ = 0, world_size_ = 1;
  c10::intrusive_ptr<c10d::Store> store_;
  double stall_timeout_s_ = 0;
  double period_s_ = 2;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<int64_t> path_ns_{0};
  std::atomic<int64_t> writer_cpu_ns_{0};
  std::atomic<int64_t> beats_{0};
};

// The process's heartbeat (one per rank process).
Heartbeat& GlobalHeartbeat();

}  // namespace dtrain::clip
