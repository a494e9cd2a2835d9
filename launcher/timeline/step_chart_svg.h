// The summary as a picture: one bar per rank (mean step time, split into compute, exposed
// communication, waiting and idle, with the 5th to 95th percentile step as a whisker) and each
// rank's step time over the run. Plain SVG text, viewable in any browser.
#pragma once

#include <string>

#include "launcher/timeline/timeline_summary.h"

namespace dtrain {

std::string StepChartSvg(const TimelineSummary& summary);

}  // namespace dtrain
