// Multi-query associative recall (Zoology; NOTES.md "MQAR"): n key-value pairs, then the keys asked again at
// power-law distributed positions; only the answers to the queries are scored.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "contract/job/mqar_settings.h"

namespace fwlab {

// A generated task's batch (MQAR, associative retrieval).
struct TaskBatch {
  int64_t batch = 0, len = 0;
  std::vector<int32_t> inputs;   // [batch, len]
  std::vector<int32_t> targets;  // [batch, len]; -1 where nothing is asked
};

// Moves n entries drawn without replacement to the front of `pool` (a partial Fisher-Yates shuffle).
void draw_distinct(std::vector<int32_t>& pool, int64_t n, std::mt19937_64& rng);

// Deterministic in (spec, batch, seed).
TaskBatch make_mqar_batch(const MqarSpec& spec, int64_t batch, uint64_t seed);

}  // namespace fwlab
