// How long ago something happened, as dtrain's messages say it: "40 s", "12 min", "3 h", "2 days".
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

// `seconds` (below 0 taken as 0) in whole units: seconds below 2 min, minutes below 2 h, hours
// below 2 days, else days.
std::string AgeText(int64_t seconds);

}  // namespace dtrain
