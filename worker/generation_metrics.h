// The figures both generation benchmarks (decoder-only and encoder-decoder) log at one generated length.
#pragma once

#include <cstdint>
#include <vector>

#include "contract/job/events.h"

namespace fwlab {

// Per-token time over the repeats (median, min, max: gen_ms_per_token[_min|_max]), the state's bytes
// (gen_state_bytes) and the process's peak RSS (gen_peak_rss_bytes), as metric events at step `length`.
// Sorts per_token_ms and returns its median.
double log_generation_metrics(EventLog& log, int64_t length, std::vector<double>& per_token_ms, int64_t state_bytes);

}  // namespace fwlab
