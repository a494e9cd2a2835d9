// Follows HTA 0.5.0's CudaKernelAnalysis.get_aten_op_kernels_and_delay (hta/analyzers/
// cuda_kernel_analysis.py). The operator a launch belongs to is found with a segment tree over
// the operators sorted by start (the longest first of those starting together), holding the
// latest end of each range: the rightmost operator starting no later than the call whose end is
// no earlier than the call's, in O(log n) a launch (HTA scans every operator for every launch).
// HTA 0.5 also adds the rows of the ranks before to each rank's table; here each rank has its own.
#include "launcher/timeline/aten_op_launches.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

namespace dtrain {
namespace {

constexpr size_t kShown = 8;

// The rightmost leaf below `limit` whose value is at least `target`, searched in the subtree of
// max-tree `tree` rooted at `node`, which covers leaves [lo, hi); -1 when none.
int64_t RightmostAtLeast(const std::vector<double>& tree, size_t node, size_t lo, size_t hi,
                         size_t limit, double target) {
  if (lo >= limit || tree[node] < target) return -1;
  if (hi - lo == 1) return static_cast<int64_t>(lo);
  const size_t mid = lo + (hi - lo) / 2;
  const int64_t right = RightmostAtLeast(tree, 2 * node + 1, mid, hi, limit, target);
  return right >= 0 ? right : RightmostAtLeast(tree, 2 * node, lo, mid, limit, target);
}

}  // namespace

bool IsHtaKernelLaunchCall(std::string_view name) {
  // HTA: re.match("(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)", name).
  if (name.rfind("cuda", 0) == 0 && name.find("LaunchKernel", 4) != std::string_view::npos) {
    return true;
  }
  return name.rfind("cuLaunchKernel", 0) == 0 || name.rfind("runFunction", 0) == 0;
}

void AtenOpLaunchBuilder::AddOp(int rank, std::string_view name, double start_us, double end_us) {
  ranks_[rank].ops.push_back(Op{start_us, end_us, names_.Intern(name)});
}

void AtenOpLaunchBuilder::AddLaunch(int rank, int64_t correlation, double start_us, double end_us) {
  ranks_[rank].launches.push_back(Launch{start_us, end_us, correlation});
}

void AtenOpLaunchBuilder::EndRank(int rank, const KernelOf& kernel_of, double cutoff_us) {
  auto found = ranks_.find(rank);
  if (found == ranks_.end()) return;
  RankState& state = found->second;
  std::vector<Op>& ops = state.ops;
  ops.erase(
      std::remove_if(ops.begin(), ops.end(), [&](const Op& o) { return o.start >= cutoff_us; }),
      ops.end());
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  size_t size = 1;
  while (size < ops.size()) size *= 2;
  std::vector<double> tree(2 * size, -std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < ops.size(); ++i) tree[size + i] = ops[i].end;
  for (size_t node = size - 1; node >= 1; --node) {
    tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }

  std::vector<Launch>& launches = state.launches;
  std::sort(launches.begin(), launches.end(),
            [](const Launch& a, const Launch& b) { return a.start < b.start; });
  // Each launch matched: its operator run (the index in `ops`) and kernel, in launch order.
  struct Matched {
    size_t op;
    double op_to_launch, launch_to_kernel;
    std::string_view kernel;
  };
  std::vector<Matched> matched;
  for (const Launch& launch : launches) {
    if (launch.start >= cutoff_us) continue;
    std::string_view kernel_name;
    double kernel_start = 0;
    if (!kernel_of(launch.correlation, &kernel_name, &kernel_start)) continue;
    const size_t limit =
        static_cast<size_t>(std::upper_bound(ops.begin(), ops.end(), launch.start,
                                             [](double t, const Op& o) { return t < o.start; }) -
                            ops.begin());
    const int64_t at = RightmostAtLeast(tree, 1, 0, size, limit, launch.end);
    if (at < 0) continue;
    matched.push_back(Matched{static_cast<size_t>(at), launch.start - ops[at].start,
                              kernel_start - launch.start, kernel_name});
  }
  std::vector<double>().swap(tree);
  std::vector<Launch>().swap(launches);
  std::stable_sort(matched.begin(), matched.end(),
                   [](const Matched& a, const Matched& b) { return a.op < b.op; });
  // Per operator name and kernel sequence: an operator run's first launch gives its delays.
  std::map<std::pair<uint32_t, std::string>, AtenOpKernels> sequences;
  std::string kernels;
  for (size_t i = 0; i < matched.size();) {
    const Matched& first = matched[i];
    kernels.assign(first.kernel);
    for (++i; i < matched.size() && matched[i].op == first.op; ++i) {
      kernels.append(" -> ").append(matched[i].kernel);
    }
    AtenOpKernels& s = sequences[{ops[first.op].name, kernels}];
    s.count += 1;
    s.op_to_launch_us += first.op_to_launch;  // summed here, divided below
    s.launch_to_kernel_us += first.launch_to_kernel;
  }
  RankAtenOpKernels out;
  out.rank = rank;
  for (auto& [key, s] : sequences) {
    s.op = names_[key.first];
    s.kernels = key.second;
    s.op_to_launch_us /= static_cast<double>(s.count);
    s.launch_to_kernel_us /= static_cast<double>(s.count);
    out.sequences.push_back(std::move(s));
  }
  std::stable_sort(out.sequences.begin(), out.sequences.end(),
                   [](const AtenOpKernels& a, const AtenOpKernels& b) {
                     return std::tie(b.count, a.op, a.kernels) < std::tie(a.count, b.op, b.kernels);
                   });
  if (!out.sequences.empty()) done_.push_back(std::move(out));
  ranks_.erase(found);
}

std::vector<RankAtenOpKernels> AtenOpLaunchBuilder::Finish() {
  const KernelOf none = [](int64_t, std::string_view*, double*) { return false; };
  while (!ranks_.empty()) EndRank(ranks_.begin()->first, none);
  std::sort(done_.begin(), done_.end(),
            [](const RankAtenOpKernels& a, const RankAtenOpKernels& b) { return a.rank < b.rank; });
  return std::move(done_);
}

std::string FormatAtenOpKernels(const std::vector<RankAtenOpKernels>& ranks) {
  if (ranks.empty()) return "";
  const RankAtenOpKernels& r = ranks.front();
  std::string out = fmt::format(
      "Kernels each ATen operator launches, rank {} (as HTA's ATen op kernels and delay: op to "
      "launch, the\nCPU's time from the operator's start to its first launch; launch to kernel, "
      "from there to the GPU's\nstart; means over the runs; every rank in --json)\n"
      "{:<24} {:>6} {:>10} {:>13}  {}\n",
      r.rank, "operator", "runs", "op-launch", "launch-kernel", "kernels");
  for (size_t i = 0; i < r.sequences.size() && i < kShown; ++i) {
    const AtenOpKernels& s = r.sequences[i];
    const std::string op = s.op.size() > 24 ? s.op.substr(0, 21) + "..." : s.op;
    const std::string kernels = s.kernels.size() > 60 ? s.kernels.substr(0, 57) + "..." : s.kernels;
    out += fmt::format("{:<24} {:>6} {:>7.1f} us {:>10.1f} us  {}\n", op, s.count,
                       s.op_to_launch_us, s.launch_to_kernel_us, kernels);
  }
  if (r.sequences.size() > kShown) {
    out += fmt::format("(and {} more)\n", r.sequences.size() - kShown);
  }
  return out;
}

nlohmann::json AtenOpKernelsJson(const std::vector<RankAtenOpKernels>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankAtenOpKernels& r : ranks) {
    nlohmann::json sequences = nlohmann::json::array();
    for (const AtenOpKernels& s : r.sequences) {
      sequences.push_back({{"op", s.op},
                           {"kernels", s.kernels},
                           {"count", s.count},
                           {"op_to_launch_us", s.op_to_launch_us},
                           {"launch_to_kernel_us", s.launch_to_kernel_us}});
    }
    out.push_back({{"rank", r.rank}, {"sequences", std::move(sequences)}});
  }
  return out;
}

}  // namespace dtrain
