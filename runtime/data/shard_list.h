// WebDataset shard lists: brace patterns ("shards-{0000..0099}.tar", "{a,b}.tar", several
// patterns joined by "::") expanded to paths, and the split of shards over ranks and loaders.
#pragma once

#include <string>
#include <vector>

namespace dtrain::clip {

// Expands every brace group, left to right; a numeric range keeps the width of its first bound
// ("{0008..0011}" -> 0008 0009 0010 0011). Throws std::runtime_error on an unclosed brace or a
// descending range.
std::vector<std::string> ExpandShardPattern(const std::string& pattern);

// The shards loader thread `worker` of `rank` reads: every world_size-th shard from position
// rank, then every workers-th of those from position worker. Throws std::runtime_error when
// there are fewer shards than world_size x workers (some loader would have none).
std::vector<std::string> ShardsFor(const std::vector<std::string>& shards, int rank, int world_size,
                                   int worker, int workers);

}  // namespace dtrain::clip
