// The distributed sampler (explicit rank/world size) and the WebDataset shard list and split.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/shard_list.h"

namespace dtrain::clip {
namespace {

std::vector<std::vector<int64_t>> AllRanks(int64_t n, int world, bool drop_last, int epoch,
                                           uint64_t seed = 42, int64_t num_samples = 0) {
  std::vector<std::vector<int64_t>> ranks;
  for (int r = 0; r < world; ++r) {
    DistributedSampler sampler({n, r, world, seed, true, drop_last, num_samples});
    ranks.push_back(sampler.EpochIndices(epoch));
    EXPECT_EQ(static_cast<int64_t>(ranks.back().size()), sampler.SamplesPerRank());
  }
  return ranks;
}

// A resume mid-epoch: the first `consumed` ids of the epoch's global order (what `from` ranks took
// in `steps` steps of `batch` each) are passed over, and the rest is split over `to` ranks.
TEST(DistributedSampler, ResumedEpochContinuesTheGlobalOrderOnTheSameOrFewerRanks) {
  const int64_t n = 96, batch = 4;
  const int from = 2, steps = 3;
  auto full = AllRanks(n, from, true, 1);
  // Global position p of the epoch's order is full[p % from][p / from].
  auto position = [&](int64_t p) { return full[p % from][p / from]; };
  const int64_t consumed = steps * batch * from;
  std::multiset<int64_t> before;
  for (int64_t p = 0; p < consumed; ++p) before.insert(position(p));
  for (int to : {2, 1}) {
    std::multiset<int64_t> seen = before;
    for (int r = 0; r < to; ++r) {
      DistributedSampler sampler({n, r, to, 42, true, true, 0});
      auto share = sampler.EpochIndices(1, consumed);
      EXPECT_EQ(static_cast<int64_t>(share.size()), sampler.SamplesPerRank(consumed));
      EXPECT_EQ(static_cast<int64_t>(share.size()), (n - consumed) / to);
      for (size_t i = 0; i < share.size(); ++i) {
        // Position consumed + i*to + r: with the same world size exactly the rank's own tail.
        EXPECT_EQ(share[i], position(consumed + static_cast<int64_t>(i) * to + r));
        seen.insert(share[i]);
      }
    }
    std::set<int64_t> distinct(seen.begin(), seen.end());
    EXPECT_EQ(distinct.size(), seen.size()) << "a sample seen twice resuming on " << to;
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "a sample skipped resuming on " << to;
  }
}

TEST(DistributedSampler, DropLastGivesEqualDisjointSharesCoveringAllButTheRemainder) {
  for (int64_t n : {1000, 1001, 7}) {
    for (int world : {1, 2, 3, 4, 7}) {
      auto ranks = AllRanks(n, world, true, 0);
      std::set<int64_t> seen;
      for (const auto& share : ranks) {
        EXPECT_EQ(static_cast<int64_t>(share.size()), n / world);
        for (int64_t id : share) {
          EXPECT_TRUE(id >= 0 && id < n);
          EXPECT_TRUE(seen.insert(id).second) << "sample " << id << " on two ranks";
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n / world * world);
    }
  }
}

TEST(DistributedSampler, PaddingCoversTheWholeDatasetWithEqualShares) {
  for (int64_t n : {1000, 1001, 10}) {
    for (int world : {2, 3, 4}) {
      auto ranks = AllRanks(n, world, false, 3);
      std::map<int64_t, int> count;
      for (const auto& share : ranks) {
        EXPECT_EQ(static_cast<int64_t>(share.size()), (n + world - 1) / world);
        for (int64_t id : share) ++count[id];
      }
      EXPECT_EQ(static_cast<int64_t>(count.size()), n) << "union of the ranks = the dataset";
      int repeats = 0;
      for (auto& [id, c] : count) repeats += c - 1;
      EXPECT_EQ(repeats, (world - n % world) % world) << "only the padding repeats";
    }
  }
}

TEST(DistributedSampler, ReshufflesPerEpochAndAgreesAcrossRanksForOneSeed) {
  auto epoch0 = AllRanks(500, 2, true, 0);
  auto epoch1 = AllRanks(500, 2, true, 1);
  EXPECT_NE(epoch0[0], epoch1[0]);
  EXPECT_EQ(epoch0, AllRanks(500, 2, true, 0)) << "same seed and epoch, same split";
  EXPECT_NE(epoch0, AllRanks(500, 2, true, 0, 43)) << "another seed, another order";
  // Not the identity order either.
  std::vector<int64_t> sorted = epoch0[0];
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, epoch0[0]);
}

TEST(DistributedSampler, NumSamplesLimitsTheEpoch) {
  auto ranks = AllRanks(1000, 4, true, 0, 1, 100);
  std::set<int64_t> seen;
  for (const auto& share : ranks) {
    EXPECT_EQ(share.size(), 25u);
    seen.insert(share.begin(), share.end());
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(DistributedSampler, RejectsBadRanksAndTooFewSamples) {
  EXPECT_THROW(DistributedSampler({10, 2, 2, 0, true, true, 0}), std::invalid_argument);
  EXPECT_THROW(DistributedSampler({10, -1, 2, 0, true, true, 0}), std::invalid_argument);
  EXPECT_THROW(DistributedSampler({3, 0, 4, 0, true, true, 0}), std::invalid_argument);
  EXPECT_NO_THROW(DistributedSampler({3, 0, 4, 0, true, false, 0}));
}

TEST(ShardList, ExpandsBraceRangesAndLists) {
  EXPECT_EQ(ExpandShardPattern("/d/s-{0008..0011}.tar"),
            (std::vector<std::string>{"/d/s-0008.tar", "/d/s-0009.tar", "/d/s-0010.tar",
                                      "/d/s-0011.tar"}));
  EXPECT_EQ(ExpandShardPattern("{a,b}-{1..2}.tar::x.tar"),
            (std::vector<std::string>{"a-1.tar", "a-2.tar", "b-1.tar", "b-2.tar", "x.tar"}));
  EXPECT_EQ(ExpandShardPattern("s-{0000..0099}.tar").size(), 100u);
  EXPECT_THROW(ExpandShardPattern("s-{0001..0000}.tar"), std::runtime_error);
  EXPECT_THROW(ExpandShardPattern("s-{0000..0003.tar"), std::runtime_error);
}

TEST(ShardList, SplitsByRankThenByLoaderWithoutOverlap) {
  std::vector<std::string> shards = ExpandShardPattern("s-{00..22}.tar");
  const int world = 3, workers = 2;
  std::map<std::string, int> owner;
  for (int r = 0; r < world; ++r) {
    for (int w = 0; w < workers; ++w) {
      auto mine = ShardsFor(shards, r, world, w, workers);
      EXPECT_GE(mine.size(), 3u);
      for (const auto& s : mine) {
        EXPECT_EQ(owner.count(s), 0u) << s << " read twice";
        owner[s] = r;
        // The rank part is every world-th shard.
        const int position = std::stoi(s.substr(2, 2));
        EXPECT_EQ(position % world, r);
      }
    }
  }
  EXPECT_EQ(owner.size(), shards.size());
  try {
    ShardsFor(ExpandShardPattern("s-{0..4}.tar"), 0, 3, 0, 2);
    FAIL() << "5 shards cannot feed 3 ranks x 2 loaders";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("5 shards for 3 ranks x 2 loader threads"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain::clip
