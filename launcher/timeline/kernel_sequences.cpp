// Follows HTA 0.5.0's CudaKernelAnalysis.get_frequent_cuda_kernel_sequences (hta/analyzers/
// cuda_kernel_analysis.py) over its call graph (hta/common/trace_call_graph.py): a thread's CPU
// events nest by time into call stacks, depth 0 at the bottom; a GPU activity hangs under the CPU
// event that launched it (the correlation id they share). The counted events are those matching
// the name at the smallest depth among all matches of the rank (not the shallowest of each
// branch), as HTA takes them.
#include "launcher/timeline/kernel_sequences.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "launcher/timeline/trace_record.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain {
namespace {

std::string Pattern(const KernelSequence& s) {
  std::string out = s.op;
  for (const std::string& k : s.kernels) out += "|" + k;
  return out;
}

std::string Shorten(const std::string& name, size_t width) {
  return name.size() <= width ? name : name.substr(0, width - 3) + "...";
}

}  // namespace

KernelSequenceBuilder::KernelSequenceBuilder(std::string operator_name, int min_pattern_len)
    : operator_name_(std::move(operator_name)), min_pattern_len_(min_pattern_len) {}

void KernelSequenceBuilder::Add(const KinetoEvent& event) {
  RankState& state = ranks_[event.rank];
  // The last profiler step begins where the last record named so does, on either side (HTA's
  // cutoff, as the GPU summary's).
  if (event.name.find("ProfilerStep") != std::string_view::npos) {
    state.profiler_steps.insert(names_.Intern(event.name));
    state.last_profiler_step_us = std::max(state.last_profiler_step_us, event.ts_us);
  }
  if (event.stream >= 0 || event.cat == "gpu_user_annotation") {  // the GPU's side
    state.gpu_tracks.insert(event.thread);
    if (event.correlation >= 0 && event.stream >= 0) {
      state.gpu[event.correlation].activities.push_back(
          GpuActivity{event.ts_us, event.dur_us, names_.Intern(event.name)});
    }
    return;
  }
  state.cpu.push_back(CpuEvent{event.ts_us, event.ts_us + event.dur_us, event.thread,
                               names_.Intern(event.name), event.correlation});
}

const RankKernelSequences* KernelSequenceBuilder::EndRank(int rank) {
  auto found = ranks_.find(rank);
  if (found == ranks_.end()) return nullptr;
  RankState& state = found->second;
  std::vector<CpuEvent>& cpu = state.cpu;
  const double cutoff = state.profiler_steps.size() >= 2 ? state.last_profiler_step_us
                                                         : std::numeric_limits<double>::infinity();
  cpu.erase(std::remove_if(cpu.begin(), cpu.end(),
                           [&](const CpuEvent& e) {
                             return e.start >= cutoff || state.gpu_tracks.count(e.thread);
                           }),
            cpu.end());
  // By thread, then as stacks open: earlier first, the longer of two starting together outside.
  std::sort(cpu.begin(), cpu.end(), [](const CpuEvent& a, const CpuEvent& b) {
    return std::tie(a.thread, a.start, b.end) < std::tie(b.thread, b.start, a.end);
  });
  std::vector<bool> matches(names_.size());
  for (uint32_t id = 0; id < names_.size(); ++id) {
    matches[id] = names_[id].find(operator_name_) != std::string::npos;
  }
  // Each thread's events, [first, last); HTA's labels: the main thread has a ProfilerStep#, the
  // backward thread (autograd's) an autograd:: event.
  struct Thread {
    size_t first, last;
    bool main = false, backward = false;
  };
  std::vector<Thread> threads;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (threads.empty() || cpu[threads.back().first].thread != cpu[i].thread) {
      if (!threads.empty()) threads.back().last = i;
      threads.push_back(Thread{i, cpu.size()});
    }
    const std::string& name = names_[cpu[i].name];
    if (name.rfind("ProfilerStep#", 0) == 0) threads.back().main = true;
    if (name.find("autograd::") != std::string::npos) threads.back().backward = true;
  }
  const Thread* main_thread = nullptr;
  const Thread* backward_thread = nullptr;
  int mains = 0, backwards = 0;
  for (const Thread& t : threads) {
    if (t.main) ++mains, main_thread = &t;
    if (!t.main && t.backward) ++backwards, backward_thread = &t;
  }
  // HTA hangs the backward thread's outermost events under the main thread's "## backward ##"
  // annotation (else ProfilerStep#) that spans them, when the rank has one thread of each.
  const bool link = mains == 1 && backwards == 1;
  std::string parent_prefix = "ProfilerStep#";
  if (link) {
    for (size_t i = main_thread->first; i < main_thread->last; ++i) {
      if (names_[cpu[i].name].rfind("## backward ##", 0) == 0) parent_prefix = "## backward ##";
    }
  }
  struct Candidate {
    size_t event;
    int depth;
    std::vector<const GpuActivity*> activities;
  };
  struct Parent {  // a main-thread annotation the backward thread's events may hang under
    double start, end;
    int depth;
    std::vector<int64_t> open;  // the candidates it is in (itself included)
  };
  std::vector<Candidate> candidates;
  std::vector<Parent> parents;
  auto sweep = [&](const Thread& t) {
    std::vector<std::pair<double, int64_t>> stack;  // (end, candidate index or -1)
    const Parent* parent = nullptr;                 // of the current outermost event
    for (size_t i = t.first; i < t.last; ++i) {
      const CpuEvent& e = cpu[i];
      while (!stack.empty() && stack.back().first <= e.start) stack.pop_back();
      if (stack.empty()) {
        parent = nullptr;
        if (link && &t == backward_thread) {
          for (const Parent& p : parents) {
            if (p.start <= e.start && e.end <= p.end) parent = &p;
          }
        }
      }
      const int depth = static_cast<int>(stack.size()) + (parent ? parent->depth + 1 : 0);
      int64_t candidate = -1;
      if (matches[e.name]) {
        candidate = static_cast<int64_t>(candidates.size());
        candidates.push_back(Candidate{i, depth, {}});
      }
      stack.emplace_back(e.end, candidate);
      if (link && &t == main_thread && names_[e.name].rfind(parent_prefix, 0) == 0) {
        Parent p{e.start, e.end, depth, {}};
        for (const auto& [end, c] : stack) {
          if (c >= 0) p.open.push_back(c);
        }
        parents.push_back(std::move(p));
      }
      if (e.correlation < 0) continue;
      auto launched = state.gpu.find(e.correlation);
      if (launched == state.gpu.end() || launched->second.linked) continue;
      launched->second.linked = true;
      auto attach = [&](int64_t c) {
        for (const GpuActivity& a : launched->second.activities) {
          candidates[c].activities.push_back(&a);
        }
      };
      for (const auto& [end, c] : stack) {
        if (c >= 0) attach(c);
      }
      if (parent) {
        for (int64_t c : parent->open) attach(c);
      }
    }
  };
  if (link) sweep(*main_thread);
  for (const Thread& t : threads) {
    if (!(link && &t == main_thread)) sweep(t);
  }
  RankKernelSequences out;
  out.rank = rank;
  for (const Candidate& c : candidates) {
    out.depth = out.depth < 0 ? c.depth : std::min(out.depth, c.depth);
  }
  std::map<std::string, KernelSequence> by_pattern;
  for (Candidate& c : candidates) {
    if (c.depth != out.depth || c.activities.size() < static_cast<size_t>(min_pattern_len_)) {
      continue;
    }
    std::stable_sort(
        c.activities.begin(), c.activities.end(),
        [](const GpuActivity* a, const GpuActivity* b) { return a->start < b->start; });
    KernelSequence s;
    s.op = names_[cpu[c.event].name];
    for (const GpuActivity* a : c.activities) {
      s.kernels.push_back(names_[a->name]);
      s.gpu_us += a->dur;
    }
    s.cpu_us = cpu[c.event].end - cpu[c.event].start;
    double gpu_end = c.activities.front()->start;
    for (const GpuActivity* a : c.activities) gpu_end = std::max(gpu_end, a->start + a->dur);
    const KernelSequence::Run run{cpu[c.event].start, cpu[c.event].end, c.activities.front()->start,
                                  gpu_end};
    auto [it, added] = by_pattern.try_emplace(Pattern(s), s);
    if (!added) {
      it->second.gpu_us += s.gpu_us;
      it->second.cpu_us += s.cpu_us;
    }
    it->second.runs.push_back(run);
    ++it->second.count;
  }
  for (auto& [pattern, s] : by_pattern) out.sequences.push_back(std::move(s));
  // by_pattern was in pattern order: a stable sort by count keeps it among equals, as HTA's.
  std::stable_sort(
      out.sequences.begin(), out.sequences.end(),
      [](const KernelSequence& a, const KernelSequence& b) { return a.count > b.count; });
  done_.push_back(std::move(out));
  ranks_.erase(found);
  return &done_.back();
}

KernelSequences KernelSequenceBuilder::Finish() {
  std::vector<int> left;
  for (const auto& [rank, state] : ranks_) left.push_back(rank);
  for (int rank : left) EndRank(rank);
  std::sort(
      done_.begin(), done_.end(),
      [](const RankKernelSequences& a, const RankKernelSequences& b) { return a.rank < b.rank; });
  return KernelSequences{operator_name_, min_pattern_len_, std::move(done_)};
}

std::string FormatKernelSequences(const KernelSequences& found, size_t top) {
  const std::string& operator_name = found.operator_name;
  const int min_pattern_len = found.min_pattern_len;
  const RankKernelSequences* first = nullptr;
  for (const RankKernelSequences& r : found.ranks) {
    if (!r.sequences.empty()) {
      first = &r;
      break;
    }
  }
  if (first == nullptr) {
    return fmt::format(
        "Frequent kernel sequences: no CPU event named like \"{}\" launched {} or more GPU "
        "activities at the shallowest depth such events have (on any rank)\n",
        operator_name, min_pattern_len);
  }
  std::string out = fmt::format(
      "Frequent kernel sequences of \"{}\" (rank {}: the events at call depth {} with {} or more "
      "GPU activities; {} pattern(s), --json has every rank's):\n",
      operator_name, first->rank, first->depth, min_pattern_len, first->sequences.size());
  out += fmt::format("{:>7} {:>10} {:>10}  {}\n", "count", "GPU ms", "CPU ms",
                     "operator, then its kernels in order");
  for (size_t i = 0; i < first->sequences.size() && i < top; ++i) {
    const KernelSequence& s = first->sequences[i];
    out += fmt::format("{:>7} {:>10.3f} {:>10.3f}  {}\n", s.count, s.gpu_us / 1000, s.cpu_us / 1000,
                       Shorten(s.op, 90));
    for (size_t k = 0; k < s.kernels.size(); ++k) {
      if (k == 6 && s.kernels.size() > 8) {
        out += fmt::format("{:>31}... {} more\n", "", s.kernels.size() - 7);
        k = s.kernels.size() - 1;
      }
      out += fmt::format("{:>31}{}\n", "", Shorten(s.kernels[k], 90));
    }
  }
  return out;
}

nlohmann::json KernelSequencesJson(const KernelSequences& found) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankKernelSequences& r : found.ranks) {
    nlohmann::json patterns = nlohmann::json::array();
    for (const KernelSequence& s : r.sequences) {
      patterns.push_back({{"operator", s.op},
                          {"kernels", s.kernels},
                          {"count", s.count},
                          {"gpu_us", s.gpu_us},
                          {"cpu_us", s.cpu_us}});
    }
    ranks.push_back({{"rank", r.rank}, {"depth", r.depth}, {"patterns", patterns}});
  }
  return {{"operator", found.operator_name},
          {"min_pattern_len", found.min_pattern_len},
          {"ranks", ranks}};
}

void WriteKernelSequenceOverlay(const RankKernelSequences& rank, const std::string& operator_name,
                                MergedTraceFile& out, size_t top) {
  if (rank.sequences.empty()) return;
  out.Write({{"name", trace::kThreadName},
             {"ph", "M"},
             {"pid", rank.rank},
             {"tid", kKernelSequencesTrack},
             {"args", {{"name", "kernel sequences: " + operator_name}}}});
  out.Write({{"name", "thread_sort_index"},
             {"ph", "M"},
             {"pid", rank.rank},
             {"tid", kKernelSequencesTrack},
             {"args", {{"sort_index", -1}}}});
  for (size_t i = 0; i < rank.sequences.size() && i < top; ++i) {
    const KernelSequence& s = rank.sequences[i];
    const std::string name =
        EncodeJsonString(fmt::format("#{} {} ({} runs)", i + 1, s.op, s.count));
    for (const KernelSequence::Run& run : s.runs) {
      std::string ts, dur;
      AppendMicros(std::llround(run.cpu_start * 1000.0), ts);
      AppendMicros(std::llround((run.cpu_end - run.cpu_start) * 1000.0), dur);
      out.WriteText(fmt::format(
          R"({{"ph":"X","cat":"kernel_sequence","name":{},"pid":{},"tid":{},"ts":{},"dur":{},)"
          R"("args":{{"pattern":{},"count":{},"kernels":{},"gpu_first_to_last_us":{:.3f}}}}})",
          name, rank.rank, kKernelSequencesTrack, ts, dur, i + 1, s.count, s.kernels.size(),
          run.gpu_end - run.gpu_start));
    }
  }
}

}  // namespace dtrain
