// Multi-query associative recall (Zoology; NOTES.md "MQAR"): n key-value pairs, then the keys asked again at
// power-law distributed positions; only the answers to the queries are scored.
#pragma once

#include <cstdint>
#include <vector>

#include "contract/mqar_spec.h"

namespace fwlab {

struct MqarBatch {
  int64_t batch = 0, len = 0;
  std::vector<int32_t> inputs;   // [batch, len]
  std::vector<int32_t> targets;  // [batch, len]; -1 where nothing is asked
};

// Deterministic in (spec, batch, seed).
MqarBatch make_mqar_batch(const MqarSpec& spec, int64_t batch, uint64_t seed);

}  // namespace fwlab
