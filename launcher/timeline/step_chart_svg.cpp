// Drawn by hand: rectangles, lines and text on a fixed 900x560 canvas; values are scaled to the
// largest step so ranks compare at a glance.
#include "launcher/timeline/step_chart_svg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace dtrain {
namespace {

constexpr int kWidth = 900;
constexpr int kLeft = 70;
constexpr int kRight = 20;
constexpr int kBarTop = 50;
constexpr int kBarHeight = 200;
constexpr int kLineTop = 320;
constexpr int kLineHeight = 180;
constexpr int kHeight = 560;
constexpr size_t kMaxPoints = 300;

const char* kColours[] = {"#4e79a7", "#e15759", "#f28e2b", "#bab0ac"};  // compute comm wait idle
const char* kNames[] = {"compute", "communication (not overlapped)", "waiting", "idle"};

double Ms(int64_t us) {
  return static_cast<double>(us) / 1000.0;
}

std::string RankColour(size_t i, size_t n) {
  return fmt::format("hsl({},65%,45%)",
                     static_cast<int>(360.0 * static_cast<double>(i) /
                                      static_cast<double>(std::max<size_t>(n, 1))));
}

// Per-step value of a rank's bar: its mean step, or its whole wall time when it has no steps.
double BarMs(const RankTime& r) {
  if (r.step_us.empty()) return Ms(r.wall_us);
  int64_t sum = 0;
  for (int64_t s : r.step_us) sum += s;
  return Ms(sum) / static_cast<double>(r.step_us.size());
}

// The q-quantile of a rank's step times (q in [0, 1]); its wall time without steps.
double StepQuantileMs(const RankTime& r, double q) {
  if (r.step_us.empty()) return Ms(r.wall_us);
  std::vector<int64_t> sorted = r.step_us;
  std::sort(sorted.begin(), sorted.end());
  return Ms(sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))]);
}

void Axis(std::string& svg, int top, int height, const AxisScale& scale, const char* label) {
  for (int i = 0; i <= scale.ticks; ++i) {
    double v = scale.step * i;
    int y = top + height - static_cast<int>(std::lround(height * v / scale.top));
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>"
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.{}f}</text>\n",
        kLeft, y, kWidth - kRight, y, kLeft - 6, y + 4, v, scale.decimals);
  }
  svg += fmt::format(
      "<text x=\"14\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 14 {})\" "
      "text-anchor=\"middle\">{}</text>\n",
      top + height / 2, top + height / 2, label);
}

void Bars(std::string& svg, const TimelineSummary& summary, double max_ms) {
  size_t n = summary.ranks.size();
  double slot = static_cast<double>(kWidth - kLeft - kRight) / static_cast<double>(n);
  double bar = std::max(1.0, slot * 0.7);
  for (size_t i = 0; i < n; ++i) {
    const RankTime& r = summary.ranks[i];
    double x = kLeft + slot * static_cast<double>(i) + (slot - bar) / 2;
    int64_t parts[] = {r.compute_us, r.comm_exposed_us, r.wait_us, r.idle_us};
    double total = std::max<double>(1.0, static_cast<double>(r.wall_us));
    double y = kBarTop + kBarHeight;
    for (int k = 0; k < 4; ++k) {
      double h = kBarHeight * (BarMs(r) / max_ms) * static_cast<double>(parts[k]) / total;
      y -= h;
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>rank {}: {} {:.1f} ms</title></rect>\n",
          x, y, bar, h, kColours[k], r.rank, kNames[k], Ms(parts[k]));
    }
    if (!r.step_us.empty()) {
      double y_lo = kBarTop + kBarHeight * (1 - StepQuantileMs(r, 0.05) / max_ms);
      double y_hi = kBarTop + kBarHeight * (1 - StepQuantileMs(r, 0.95) / max_ms);
      double cx = x + bar / 2;
      svg += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n",
          cx, y_lo, y_hi);
    }
    if (n <= 32) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}"
          "</text>\n",
          x + bar / 2, kBarTop + kBarHeight + 14, r.rank);
    }
  }
  for (int k = 0; k < 4; ++k) {
    int x = kLeft + 10 + k * 200;
    svg += fmt::format(
        "<rect x=\"{}\" y=\"30\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"39\" font-size=\"11\">{}</text>\n",
        x, kColours[k], x + 14, kNames[k]);
  }
}

void Lines(std::string& svg, const TimelineSummary& summary, double max_ms) {
  size_t steps = 0;
  for (const RankTime& r : summary.ranks) steps = std::max(steps, r.step_us.size());
  if (steps < 2) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\">no per-step data (no OPTIMIZER "
        "spans)</text>\n",
        kLeft + 10, kLineTop + kLineHeight / 2);
    return;
  }
  size_t bucket = (steps + kMaxPoints - 1) / kMaxPoints;
  double dx = static_cast<double>(kWidth - kLeft - kRight) / static_cast<double>(steps - 1);
  for (size_t i = 0; i < summary.ranks.size(); ++i) {
    const std::vector<int64_t>& s = summary.ranks[i].step_us;
    std::string points;
    for (size_t b = 0; b < s.size(); b += bucket) {
      size_t e = std::min(s.size(), b + bucket);
      int64_t sum = 0;
      for (size_t k = b; k < e; ++k) sum += s[k];
      double v = Ms(sum) / static_cast<double>(e - b);
      points += fmt::format("{:.1f},{:.1f} ", kLeft + dx * static_cast<double>(b),
                            kLineTop + kLineHeight * (1 - std::min(1.0, v / max_ms)));
    }
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\" points=\"{}\">"
        "<title>rank {}</title></polyline>\n",
        RankColour(i, summary.ranks.size()), points, summary.ranks[i].rank);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">step (1 to "
      "{})</text>\n",
      kLeft + (kWidth - kLeft - kRight) / 2, kLineTop + kLineHeight + 16, steps);
}

}  // namespace

AxisScale RoundAxis(double max_value) {
  AxisScale scale;
  if (!(max_value > 0) || !std::isfinite(max_value)) max_value = 1;
  // The smallest step of 1, 2, 2.5 or 5 times a power of ten that covers the value in at most
  // five ticks above zero.
  double power = std::pow(10.0, std::floor(std::log10(max_value / 5)));
  for (double mantissa : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    scale.step = mantissa * power;
    if (scale.step * 5 >= max_value * (1 - 1e-9)) break;
  }
  scale.ticks = std::max(1, static_cast<int>(std::ceil(max_value / scale.step - 1e-9)));
  scale.top = scale.step * scale.ticks;
  double digits = -std::floor(std::log10(scale.step) + 1e-9);
  if (std::fabs(scale.step / std::pow(10.0, -digits) - 2.5) < 1e-9) digits += 1;
  scale.decimals = std::max(0, static_cast<int>(digits));
  return scale;
}

std::string StepChartSvg(const TimelineSummary& summary) {
  double max_ms = 0.001;
  // Scaled to the slowest 95th-percentile step: one outlier (the first step) must not flatten
  // every bar; lines above the scale are clipped.
  for (const RankTime& r : summary.ranks) {
    max_ms = std::max({max_ms, BarMs(r), StepQuantileMs(r, 0.95)});
  }
  const AxisScale scale = RoundAxis(max_ms);
  max_ms = scale.top;  // bars and lines scale to the axis' top, a round number
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">Step time per rank (mean; "
      "whisker: 5th to 95th percentile step)</text>\n",
      kWidth, kHeight, kLeft);
  Axis(svg, kBarTop, kBarHeight, scale, "ms per step");
  Bars(svg, summary, max_ms);
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">Step time "
      "over the run, one line per rank</text>\n",
      kLeft, kLineTop - 14);
  Axis(svg, kLineTop, kLineHeight, scale, "ms");
  Lines(svg, summary, max_ms);
  svg += "</svg>\n";
  return svg;
}

}  // namespace dtrain
