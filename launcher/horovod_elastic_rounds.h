// HorovodElasticRounds: who is in an elastic Horovod job (horovodrun --min-np), round after
// round, as horovodrun's elastic driver keeps it (horovod/runner/elastic/driver.py and
// registration.py). The ranks start with the rank plan (round 1). A rank whose collective failed
// resets: Horovod shuts down and asks the rendezvous for its place in the next round
// (GET /rank_and_size/<HOROVOD_HOSTNAME>:<local rank>), and that answer waits until every rank of
// the round has either asked or ended. Then the hosts of the ranks that failed leave the job,
// with every rank on them, hosts that came back (Rejoin) join it after the others, and the job
// goes on in a new round: ranks renumbered in host order, local and cross ranks as horovodrun
// assigns them. A rank left out is answered "-1,..." (Horovod raises "has been removed from
// elastic job"). When fewer than --min-np ranks would remain, the nodes leave and the ranks that
// stay wait, unanswered, for nodes to join (as horovodrun's driver waits for available slots) up
// to the rounds' wait (--elastic-timeout; none: the job fails at once). The job fails when that
// wait runs out, every rank failed, or --reset-limit new rounds were used; it is done when every
// rank of the round ended well. Pure logic, safe to call from any thread.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

struct RankPlan;

// A rank's place in a round, as Horovod's gloo_context.cc parses it: "rank,size,local_rank,
// local_size,cross_rank,cross_size"; all -1 for a rank that is not in the round.
struct HorovodSlotInfo {
  int rank = -1, size = -1, local_rank = -1, local_size = -1, cross_rank = -1, cross_size = -1;
  std::string Response() const;
};

// What changed when a round was settled, for the console and the job's record.
struct ElasticRoundChange {
  int round = 0;                          // the new round's number (the plan's is 1)
  std::vector<std::string> left_hosts;    // nodes (NodeSpec::host) whose ranks left the job
  std::vector<int> failed_ranks;          // dtrain's ranks that failed in the round before
  std::vector<int> left_ranks;            // every dtrain rank that left with those nodes
  std::vector<std::string> joined_hosts;  // nodes whose ranks joined the job again (Rejoin)
  std::vector<int> joined_ranks;          // ... and their dtrain ranks
  // Nodes taken out of the job (Remove: --host-discovery-script no longer lists them), and their
  // ranks: answered "-1,..." at this round, they leave without having failed.
  std::vector<std::string> removed_hosts;
  std::vector<int> removed_ranks;
  int size = 0;  // HOROVOD_SIZE of the new round
  // The nodes above left, and fewer than --min-np ranks would remain: no new round yet, the `size`
  // ranks that stay wait up to `wait` for nodes to join (round is the one they wait for).
  bool waiting = false;
  std::chrono::seconds wait{0};
};

class HorovodElasticRounds {
 public:
  // min_np: fewest ranks the job goes on with (>= 1). reset_limit: most new rounds (-1: any).
  // max_np: most ranks in a round (0: any), which a node that joins may not go past.
  // wait: how long the ranks that stay wait for nodes to join when fewer than min_np would
  // remain (0: the job fails at once, for a job no node can join).
  using Clock = std::chrono::steady_clock;
  HorovodElasticRounds(const RankPlan& plan, int min_np, int reset_limit, int max_np = 0,
                       std::chrono::seconds wait = std::chrono::seconds(0));

  // The ranks have waited for nodes since `since` (a round short of --min-np): the job fails
  // once the wait is over at `now`. Called every tick.
  void CheckWait(Clock::time_point now);
  // Since when the ranks wait for nodes to join; nullopt when they do not.
  std::optional<Clock::time_point> waiting_since() const;
  // How long they may wait (the constructor's `wait`).
  std::chrono::seconds wait() const { return wait_; }

  // Before any rank starts: the ranks of node `host` are not in the first round (the discovery
  // script does not list it yet); the others' places are numbered without them. It may join
  // later (Rejoin).
  void Absent(const std::string& host);

  // A rank asked for its place in the next round. False when `key` ("<machine>:<local rank>")
  // names no rank of the job (answered at once, as one that left).
  bool Ready(const std::string& key);
  // A rank (dtrain's number, the plan's) ended. Ranks that left the job earlier are ignored.
  void Ended(int rank, bool ok);
  // The ranks of node `host` (NodeSpec::host), which left the job, join it again, as
  // horovodrun's driver takes back a host: the ranks in the job are to reset (a host-update
  // notification) and ask for their place; once they all did, the round is settled with the new
  // ranks in it, after the others (horovodrun appends a host that joins to its assignment order,
  // so rank 0, which holds the state the others sync from, stays where it is), and the new ranks
  // are started with their place in their environment (Slot). While the ranks wait for nodes
  // (fewer than --min-np), the round is settled at once when the node brings enough: no
  // notification is needed, Slot tells the node's ranks their place. Empty when they may join;
  // otherwise why not (the job is over, the node is in it, or --reset-limit rounds were used).
  std::string Rejoin(const std::string& host);
  // Why node `host` could not join now (Rejoin's refusal, --max-np among them); "" when it can.
  std::string WhyNotJoin(const std::string& host) const;
  // Node `host` is taken out of the job at the next round, as horovodrun's driver takes out a
  // host its discovery no longer lists: the ranks in the job are to reset (a host-update
  // notification); once they all asked, the round is settled without the node, whose ranks are
  // answered "-1,..." and end. A node that was about to join simply does not. Empty when done;
  // otherwise why not (not in the job, or the job is over).
  std::string Remove(const std::string& host);
  // The place of dtrain's rank `rank` in the current round; nullopt when it is not in it (or
  // joins it only when the round is settled).
  std::optional<HorovodSlotInfo> Slot(int rank) const;
  // The key ("<machine>:<local rank>") of the rank that is Horovod's rank 0 of the current round
  // (the coordinator horovodrun notifies); "" when none.
  std::string CoordinatorKey() const;

  // The answer for `key` once the round it asked in was settled; nullopt while it waits.
  std::optional<HorovodSlotInfo> Answer(const std::string& key) const;

  // Horovod's rendezvous scopes of the current round and their sizes ("global", "local_<machine>",
  // "cross_<local rank>"), as horovodrun's RendezvousServer.init(host_alloc_plan).
  std::map<std::string, int> ScopeSizes() const;
  // The number of the current round; bumps each time a round is settled with a new one.
  int round() const;

  enum class Verdict { kRunning, kSucceeded, kFailed };
  Verdict verdict() const;
  std::string why_failed() const;
  // The rank whose failure the job's end is blamed on (-1: none).
  int blamed_rank() const;
  // The changes since the last call.
  std::vector<ElasticRoundChange> TakeChanges();

 private:
  enum class State { kRunning, kReady, kSucceeded, kFailed };
  struct Member {
    std::string key;   // "<machine>:<local rank>"
    std::string host;  // NodeSpec::host
    std::string machine;
    int rank = 0;  // dtrain's rank (the plan's), which names its log
    int local_rank = 0;
    State state = State::kRunning;
    bool in_round = true;   // still in the job
    bool joining = false;   // rejoined, not yet in a settled round (not started: kReady)
    bool removing = false;  // Remove: leaves at the next settled round
    HorovodSlotInfo slot;   // its place in the current round
    std::optional<HorovodSlotInfo> answer;  // for its last Ready, once settled
  };

  void SettleIfDone();  // with mu_ held
  void AnswerReady();   // with mu_ held: every rank that asked and is answered now
  void Assign();        // with mu_ held: slots for every member in the round
  void TakeJoined(ElasticRoundChange& change);  // with mu_ held
  void Fail(std::string why, int rank);
  std::string WhyNotJoinLocked(const std::string& host) const;

  mutable std::mutex mu_;
  std::vector<Member> members_;     // in plan order
  std::vector<std::string> order_;  // machines in the job, in rank order (joined ones last)
  int min_np_;
  int reset_limit_;
  int max_np_;
  int resets_ = 0;
  int round_ = 1;
  Verdict verdict_ = Verdict::kRunning;
  std::string why_failed_;
  int blamed_rank_ = -1;
  int last_failed_ = -1;
  std::chrono::seconds wait_;
  std::optional<Clock::time_point> waiting_since_;
  std::vector<std::string> waiting_for_;  // the nodes whose leaving started the wait
  std::vector<ElasticRoundChange> changes_;
};

}  // namespace dtrain
