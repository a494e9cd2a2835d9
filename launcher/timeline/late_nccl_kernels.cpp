#include "launcher/timeline/late_nccl_kernels.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/timeline/running_stats.h"

namespace dtrain {

int ProfilerStepNumber(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  size_t i = kPrefix.size();
  auto skip_spaces = [&] {
    while (i < name.size() && std::isspace(static_cast<unsigned char>(name[i]))) ++i;
  };
  skip_spaces();
  if (i >= name.size() || name[i] != '#') return -1;
  ++i;
  skip_spaces();
  int number = -1;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) &&
         number < 100000000) {
    number = (number < 0 ? 0 : number * 10) + (name[i] - '0');
    ++i;
  }
  return number;
}

void LateNcclKernelBuilder::AddStep(int step, double start_us, double end_us) {
  steps_[step] = true;
  first_start_us_ = std::min(first_start_us_, start_us);
  last_end_us_ = std::max(last_end_us_, end_us);
}

void LateNcclKernelBuilder::AddActivityEnd(double end_us) {
  last_end_us_ = std::max(last_end_us_, end_us);
}

void LateNcclKernelBuilder::AddKernel(int rank, int step, int stream, std::string_view name,
                                      double start_us, double end_us) {
  runs_.push_back(Run{rank, step, stream, names_.Intern(name), start_us, end_us});
}

namespace {

std::string ShortKernelName(const std::string& name) {
  const size_t paren = name.find('(');
  return paren == std::string::npos ? name : name.substr(0, paren);
}

}  // namespace

LateNcclKernels LateNcclKernelBuilder::Finish(int candidates) const {
  LateNcclKernels out;
  out.candidates = std::max(1, candidates);
  if (steps_.empty() || runs_.empty() || last_end_us_ <= first_start_us_) return out;
  const double mean_step_us = (last_end_us_ - first_start_us_) / static_cast<double>(steps_.size());
  out.mean_step_ms = mean_step_us / 1000.0;
  // HTA's rows: steps after the first (iteration > 0), streams other than the default one, runs
  // of at least 1% of a step; of each (rank, stream, step, kernel), the last run.
  using Key = std::tuple<int, uint32_t, int, int>;  // stream, kernel, step, rank
  std::map<Key, const Run*> last;
  for (const Run& run : runs_) {
    if (run.step <= 0 || run.stream <= 0) continue;
    if (run.end_us - run.start_us < mean_step_us * kMinStepShare) continue;
    const Run*& kept = last[{run.stream, run.name, run.step, run.rank}];
    if (!kept || run.start_us >= kept->start_us) kept = &run;
  }
  // The (stream, kernel) whose run's length differs most between ranks, on average over steps.
  std::map<std::pair<int, uint32_t>, std::map<int, RunningStats>> lengths;
  for (const auto& [key, run] : last) {
    const auto& [stream, name, step, rank] = key;
    lengths[{stream, name}][step].Add((run->end_us - run->start_us) / mean_step_us);
  }
  std::pair<int, uint32_t> chosen{-1, 0};
  double most = -1;
  for (const auto& [pair, by_step] : lengths) {
    double sum = 0;
    int counted = 0;
    for (const auto& [step, stats] : by_step) {
      if (stats.count < 2) continue;  // pandas' std of one value is NaN, which mean() skips
      sum += stats.std_dev();
      ++counted;
    }
    if (counted == 0) continue;
    const double mean = sum / counted;
    if (mean > most) {
      most = mean;
      chosen = pair;
    }
  }
  if (most < 0) return out;  // no kernel on two ranks in one step
  out.kernel = names_[chosen.second];
  out.stream = chosen.first;
  // Per step, the ranks among the `candidates` latest to start the chosen kernel (ties in).
  std::map<int, std::vector<std::pair<int, double>>> starts;  // step -> (rank, start)
  for (const auto& [key, run] : last) {
    const auto& [stream, name, step, rank] = key;
    if (stream == chosen.first && name == chosen.second)
      starts[step].push_back({rank, run->start_us});
  }
  out.steps = static_cast<int>(starts.size());
  std::map<int, LateKernelRank> by_rank;
  for (auto& [step, who] : starts) {
    std::vector<double> sorted;
    double earliest = who.front().second;
    for (const auto& [rank, start] : who) {
      sorted.push_back(start);
      earliest = std::min(earliest, start);
    }
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const double threshold =
        sorted[std::min(sorted.size(), static_cast<size_t>(out.candidates)) - 1];
    for (const auto& [rank, start] : who) {
      LateKernelRank& r = by_rank[rank];
      r.rank = rank;
      r.steps += 1;
      r.mean_behind_ms += (start - earliest) / 1000.0;
      if (start >= threshold) r.steps_latest += 1;
    }
  }
  for (auto& [rank, r] : by_rank) {
    r.mean_behind_ms /= r.steps;
    out.ranks.push_back(r);
  }
  std::sort(out.ranks.begin(), out.ranks.end(),
            [](const LateKernelRank& a, const LateKernelRank& b) {
              if (a.steps_latest != b.steps_latest) return a.steps_latest > b.steps_latest;
              if (a.mean_behind_ms != b.mean_behind_ms) return a.mean_behind_ms > b.mean_behind_ms;
              return a.rank < b.rank;
            });
  for (size_t i = 0; i < out.ranks.size() && i < static_cast<size_t>(out.candidates); ++i) {
    out.stragglers.push_back(out.ranks[i].rank);
  }
  return out;
}

std::string FormatLateNcclKernels(const LateNcclKernels& late) {
  if (late.kernel.empty()) return "";
  std::vector<std::string> stragglers;
  for (int rank : late.stragglers) stragglers.push_back(std::to_string(rank));
  const bool one = late.candidates == 1;
  std::string out = fmt::format(
      "Late GPUs (HTA's potential stragglers: {} {}): in each of {} profiler steps, {} whose GPU "
      "started {} (stream {}) last, the NCCL kernel whose length differs most between ranks\n",
      stragglers.size() == 1 ? "rank" : "ranks", fmt::join(stragglers, ", "), late.steps,
      one ? std::string("the rank") : fmt::format("the {} ranks", late.candidates),
      ShortKernelName(late.kernel), late.stream);
  const std::string latest =
      one ? std::string("the latest") : fmt::format("among the {} latest", late.candidates);
  for (const LateKernelRank& r : late.ranks) {
    out += fmt::format(
        "  rank {}: {} in {} of {} steps, {:.3f} ms after the earliest rank on "
        "average\n",
        r.rank, latest, r.steps_latest, r.steps, r.mean_behind_ms);
  }
  return out;
}

nlohmann::json LateNcclKernelsJson(const LateNcclKernels& late) {
  if (late.kernel.empty()) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const LateKernelRank& r : late.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"steps_latest", r.steps_latest},
                     {"steps", r.steps},
                     {"mean_behind_ms", r.mean_behind_ms}});
  }
  return {{"kernel", late.kernel},
          {"stream", late.stream},
          {"candidates", late.candidates},
          {"steps", late.steps},
          {"mean_step_ms", late.mean_step_ms},
          {"stragglers", late.stragglers},
          {"ranks", ranks}};
}

}  // namespace dtrain
