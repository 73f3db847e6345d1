// Timing helpers of the benchmarks: wall-clock seconds of a call, the median of repeated calls after a warm-up,
// and greedy generation speed. `wait` returns once the device has finished the queued work (a no-op on the CPU;
// torch::cuda::synchronize on a GPU, whose kernels run asynchronously).
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "models/gpt.h"

namespace fwlab::bench {

inline void no_wait() {}

inline double seconds(const std::function<void()>& f, const std::function<void()>& wait = no_wait) {
  wait();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median over `repeats` timed runs after one warm-up.
inline double median_seconds(int repeats, const std::function<void()>& f, const std::function<void()>& wait = no_wait) {
  f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(seconds(f, wait));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Greedy tokens/s once the context holds `length` tokens (batch 1): the first `length` steps are not timed.
inline double generation_rate(GPT& model, int64_t length, int64_t tokens, const std::function<void()>& wait = no_wait) {
  torch::NoGradGuard guard;
  GenerationState state;
  auto tok = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(model->wte->weight.device()));
  for (int64_t t = 0; t < length; ++t) tok = model->step(tok, state).argmax(-1);
  const double s = seconds([&] {
    for (int64_t t = 0; t < tokens; ++t) tok = model->step(tok, state).argmax(-1);
  }, wait);
  return static_cast<double>(tokens) / s;
}

}  // namespace fwlab::bench
