#include "runtime/train/node_local_checkpoints.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "runtime/train/metrics_log.h"

namespace dtrain::clip {

std::vector<int> CheckpointKeepers(TrainCollectives& coll, const std::string& dir, int local_rank) {
  if (coll.world_size() == 1) return {0};
  // Rank 0 makes a file of a random name in its folder; a rank that sees it there shares it.
  int64_t token = 0;
  std::string marker;
  auto marker_for = [&](int64_t t) { return dir + "/.dtrain-clip-shared-" + std::to_string(t); };
  if (coll.rank() == 0) {
    token = static_cast<int64_t>(std::random_device{}() & 0x7fffffff) << 31 |
            static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
    token = std::max<int64_t>(token, 1);
    marker = marker_for(token);
    try {
      MakeDirectories(dir);
      if (FILE* f = std::fopen(marker.c_str(), "w")) {
        std::fclose(f);
      } else {
        token = 0;  // no folder to compare with: every node's first rank keeps checkpoints
      }
    } catch (const std::exception&) {
      token = 0;
    }
  }
  token = coll.GatherFromRanks(token)[0];
  const bool sees =
      coll.rank() == 0 || (token != 0 && access(marker_for(token).c_str(), F_OK) == 0);
  const bool keeps = coll.rank() == 0 || (!sees && local_rank == 0);
  const std::vector<int64_t> all = coll.GatherFromRanks(keeps ? 1 : 0);
  if (coll.rank() == 0 && token != 0) std::remove(marker.c_str());
  std::vector<int> keepers;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != 0) keepers.push_back(static_cast<int>(r));
  }
  return keepers;
}

ResumePlan PlanResume(const std::vector<int64_t>& steps) {
  ResumePlan plan;
  for (size_t r = 0; r < steps.size(); ++r) {
    if (steps[r] > plan.step) {
      plan.step = steps[r];
      plan.source = static_cast<int>(r);
    }
  }
  if (plan.step < 0) return plan;
  plan.send = std::any_of(steps.begin(), steps.end(), [&](int64_t s) { return s < plan.step; });
  return plan;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace dtrain::clip
