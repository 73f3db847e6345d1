// How fwlab writes a duration for people (the worker's log lines, the sweep's summary lines).
#pragma once

#include <string>

namespace fwlab {

// "35s", "2m20s", "1h05m".
std::string short_duration(double seconds);

}  // namespace fwlab
