#include "worker/generation_metrics.h"

#include <algorithm>
#include <utility>

#include "worker/trainer.h"

namespace fwlab {

double log_generation_metrics(EventLog& log, int64_t length, std::vector<double>& per_token_ms, int64_t state_bytes) {
  std::sort(per_token_ms.begin(), per_token_ms.end());
  const double median = per_token_ms[per_token_ms.size() / 2];
  for (const auto& [key, value] :
       std::vector<std::pair<const char*, double>>{{"gen_ms_per_token", median},
                                                   {"gen_ms_per_token_min", per_token_ms.front()},
                                                   {"gen_ms_per_token_max", per_token_ms.back()},
                                                   {"gen_state_bytes", static_cast<double>(state_bytes)},
                                                   {"gen_peak_rss_bytes", static_cast<double>(peak_rss_bytes())}})
    log.write(MetricEvent{key, length, value});
  return median;
}

}  // namespace fwlab
