// Multi-query associative recall (Zoology; NOTES.md "MQAR"): n key-value pairs, then the keys asked again at
// power-law distributed positions; only the answers to the queries are scored.
#pragma once

#include <cstdint>
#include <vector>

namespace fwlab {

struct MqarSpec {
  int64_t vocab = 256;    // keys from [1, V/2), values from [V/2, V)
  int64_t seq_len = 64;   // model input length L
  int64_t pairs = 4;      // n
  double power_a = 0.01;  // query gaps ~ i^(a-1)
};

struct MqarBatch {
  int64_t batch = 0, len = 0;
  std::vector<int32_t> inputs;   // [batch, len]
  std::vector<int32_t> targets;  // [batch, len]; -1 where nothing is asked
};

// Throws std::invalid_argument naming the field when the spec cannot hold its pairs.
void validate_mqar(const MqarSpec& spec);
// Deterministic in (spec, batch, seed).
MqarBatch make_mqar_batch(const MqarSpec& spec, int64_t batch, uint64_t seed);

}  // namespace fwlab
