// Where a training step's time goes, by operator: libtorch's profiler over a few steps, summed by operator name as
// self time (an operator's time less that of the operators it called), so that a step's time is split without
// counting anything twice. debug.profile_steps turns it on in a training job (worker/trainer.cpp); the small-model
// benchmark (bench/small_model_bench.sh) prints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fwlab {

struct OpTime {
  std::string name;
  int64_t calls = 0;
  double self_ms = 0.0;  // summed over the profiled steps
};

class OpProfile {
 public:
  // by_shape: operators keyed by their inputs' shapes too ("aten::mm [256,64] [64,8192]").
  void start(bool by_shape);
  // Stops and sums the events since start(), largest self time first.
  std::vector<OpTime> stop();
  bool running() const { return running_; }

 private:
  bool running_ = false, by_shape_ = false;
};

// A table: operator, calls a step, ms a step, share of the profiled time; the first `rows` operators and the rest
// as one line.
std::string op_table(const std::vector<OpTime>& ops, int64_t steps, size_t rows);

}  // namespace fwlab
