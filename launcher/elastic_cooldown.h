// horovodrun's cooldown for a host its elastic driver blacklisted (horovod/runner/elastic/
// discovery.py, HostState, with --blacklist-cooldown-range MIN MAX): the n-th time a node leaves
// an elastic Horovod job it may join again MIN * 2^n + u * MIN seconds later (u uniform in
// [0, 1)), at least MIN and at most MAX seconds.
#pragma once

namespace dtrain {

// horovodrun's bounds on the range (DEFAULT_COOLDOWN_LOWER/UPPER_LIMIT_SECONDS).
constexpr int kCooldownFloorS = 1;
constexpr int kCooldownCeilingS = 3600;

// The cooldown after the `count`-th leave (1, 2, ...); `u` in [0, 1).
double CooldownSeconds(double min_s, double max_s, int count, double u);

}  // namespace dtrain
