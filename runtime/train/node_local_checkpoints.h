// Checkpoints where the nodes do not share storage. Rank 0 keeps the job's checkpoints; the
// first rank of each node that does not see rank 0's checkpoint folder (its own disk, not a
// shared file system) keeps a copy of its own, so the job can go on when rank 0's node is lost.
// At a resume every rank takes the newest checkpoint that any rank holds: from its own folder
// where that holds the same step, else sent by the lowest rank that holds it (also to a rank
// whose own copy cannot be read). (A rank that
// started afresh beside a resumed rank 0 would part from it in steps and optimizer moments, and
// a job of two such ranks hangs at the epoch's end.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dist/train_collectives.h"

namespace dtrain::clip {

// The ranks that write checkpoints into their `dir`, in rank order: rank 0, and each rank with
// `local_rank` 0 that does not see a file rank 0 made in its `dir`. Collective with more than
// one rank (two gathers); makes `dir` on rank 0.
std::vector<int> CheckpointKeepers(TrainCollectives& coll, const std::string& dir, int local_rank);

// A rank's step at a resume where it holds no checkpoint, or one it could not load.
constexpr int64_t kNoCheckpoint = -1;
constexpr int64_t kUnreadableCheckpoint = -2;

// What a resume does, from each rank's checkpoint step (or one of the two above) in rank order.
struct ResumePlan {
  int64_t step = -1;  // the newest step any rank holds; -1: no rank holds a checkpoint
  int source = -1;    // the lowest rank that holds it
  bool send = false;  // some rank holds an older one, none or an unreadable one: the source sends
};
ResumePlan PlanResume(const std::vector<int64_t>& steps);

// "rank 0", "ranks 0, 2 and 3".
std::string RankList(const std::vector<int>& ranks);

}  // namespace dtrain::clip
