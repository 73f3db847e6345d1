#include "contract/job/duration_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fwlab {

std::string short_duration(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace fwlab
