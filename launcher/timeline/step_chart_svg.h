// The summary as a picture: one bar per rank (mean step time, split into compute, exposed
// communication, waiting and idle, with the 5th to 95th percentile step as a whisker) and each
// rank's step time over the run. Plain SVG text, viewable in any browser.
#pragma once

#include <string>

#include "launcher/timeline/timeline_summary.h"

namespace dtrain {

std::string StepChartSvg(const TimelineSummary& summary);

// A value axis from 0 with ticks at round numbers: `ticks` steps of `step` (1, 2, 2.5 or 5 times a
// power of ten) up to `top`, the first such value at or above the largest one shown; labels with
// `decimals` digits after the point.
struct AxisScale {
  double step = 1, top = 1;
  int ticks = 1, decimals = 0;
};
AxisScale RoundAxis(double max_value);

}  // namespace dtrain
