// Which rank arrived last at each collective, from PyTorch profiler traces: the n-th collective
// of one name (torch's c10d record_function, "nccl:all_reduce", ...) on every rank is one
// collective, since c10d issues them in the same order on every rank of a process group; its
// arrival on a rank is its start there. Per rank: how often it was last, and by how much.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/name_table.h"

namespace dtrain {

// The n-th collective of one name, matched across the ranks that ran it.
struct CollectiveArrival {
  std::string name;
  int occurrence = 0;
  int last_rank = 0;
  double late_by_ms = 0;  // last arrival minus first arrival
};

// A rank that arrived last at some collectives.
struct CollectiveStraggler {
  int rank = 0;
  int collectives_last = 0;
  int collectives = 0;  // matched collectives in all
  double total_late_ms = 0;
  double max_late_ms = 0;
};

struct CollectiveArrivals {
  std::vector<CollectiveArrival> collectives;   // in order of first arrival
  std::vector<CollectiveStraggler> stragglers;  // most often last first
};

// `starts`: per rank, each collective's name (in `names`) and start in microseconds, in any
// order (sorted here). A collective only one rank ran is not matched.
CollectiveArrivals MatchCollectives(std::map<int, std::vector<std::pair<uint32_t, double>>>& starts,
                                    const NameTable& names);

// The summary's section ("" without matched collectives), and its JSON members.
std::string FormatCollectiveStragglers(const std::vector<CollectiveArrival>& collectives,
                                       const std::vector<CollectiveStraggler>& stragglers);
nlohmann::json CollectivesJson(const std::vector<CollectiveArrival>& collectives);
nlohmann::json CollectiveStragglersJson(const std::vector<CollectiveStraggler>& stragglers);

}  // namespace dtrain
