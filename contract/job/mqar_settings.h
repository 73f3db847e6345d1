// The MQAR task's settings (a job key, data.mqar): checked by the harness before a sweep, used by the worker.
#pragma once

#include <cstdint>

namespace fwlab {

struct MqarSpec {
  int64_t vocab = 256;    // keys from [1, V/2), values from [V/2, V)
  int64_t seq_len = 64;   // model input length L
  int64_t pairs = 4;      // n
  double power_a = 0.01;  // query gaps ~ i^(a-1)
};

// Throws std::invalid_argument naming the field when the spec cannot hold its pairs.
void validate_mqar(const MqarSpec& spec);

}  // namespace fwlab
