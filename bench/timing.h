// Timing helpers of the benchmarks: wall-clock seconds of a call, the median of repeated calls after a warm-up,
// and greedy generation speed. `wait` returns once the device has finished the queued work (a no-op on the CPU;
// torch::cuda::synchronize on a GPU, whose kernels run asynchronously).
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "models/decode_graph.h"
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

// The middle of the sorted times (the upper one of the two middles where there are an even number).
inline double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Median over `repeats` timed runs after one warm-up.
inline double median_seconds(int repeats, const std::function<void()>& f, const std::function<void()>& wait = no_wait) {
  f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(seconds(f, wait));
  return median(t);
}

// Greedy tokens/s once the context holds `length` tokens (batch 1): the first `length` steps are not timed.
inline double generation_rate(GPT& model, int64_t length, int64_t tokens, const std::function<void()>& wait = no_wait) {
  torch::NoGradGuard guard;
  GenerationState state;
  auto tok = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(model->wte->weight.device()));
  for (int64_t t = 0; t < length; ++t) tok = model->step(tok, state).argmax(-1);
  const double s = seconds(
      [&] {
        for (int64_t t = 0; t < tokens; ++t) tok = model->step(tok, state).argmax(-1);
      },
      wait);
  return static_cast<double>(tokens) / s;
}

// After one step: each softmax layer's key/value cache replaced by `context` random rows, in buffers with room for
// `room` more (the cost of a token depends on the cache's length, not on what it holds; a recurrent state's size does
// not depend on the context at all), and the position moved to `context`.
inline void prefill_at_random(GenerationState& state, int64_t context, int64_t room) {
  for (auto& layer : state.layers) {
    if (!layer.k_buffer.defined()) continue;
    auto shape = layer.k_buffer.sizes().vec();
    shape[2] = context + room;  // no doubling inside the timing
    layer.k_buffer = torch::randn(shape, layer.k_buffer.options()),
    layer.v_buffer = torch::randn(shape, layer.v_buffer.options());
    layer.k = layer.k_buffer.narrow(2, 0, context), layer.v = layer.v_buffer.narrow(2, 0, context);
  }
  state.position = context;
}

// Greedy tokens/s with `context` tokens already in the context (batch 1), without generating them
// (prefill_at_random): for contexts whose token-by-token fill would take minutes (32k on a GPU).
inline double generation_rate_prefilled(GPT& model, int64_t context, int64_t tokens,
                                        const std::function<void()>& wait = no_wait) {
  torch::NoGradGuard guard;
  GenerationState state;
  auto tok = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(model->wte->weight.device()));
  tok = model->step(tok, state).argmax(-1);
  prefill_at_random(state, context, tokens);
  const double s = seconds(
      [&] {
        for (int64_t t = 0; t < tokens; ++t) tok = model->step(tok, state).argmax(-1);
      },
      wait);
  return static_cast<double>(tokens) / s;
}

// The same through DecodeGraph (models/decode_graph.h): each token one CUDA graph replay where the model allows it,
// else the static step uncaptured; *captured says which. The uncaptured first step and the capture are not timed:
// they run at the two positions before `context`.
inline double generation_rate_graphed(GPT& model, int64_t context, int64_t tokens, bool* captured,
                                      const std::function<void()>& wait = no_wait) {
  torch::NoGradGuard guard;
  GenerationState state;
  auto tok = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(model->wte->weight.device()));
  tok = model->step(tok, state).argmax(-1);
  prefill_at_random(state, context - 2, tokens + 2);  // the two untimed steps bring it to `context`
  DecodeGraph graph(model, state, context + tokens);
  for (int warm = 0; warm < 2; ++warm) tok = graph.step(tok).argmax(-1);
  const double s = seconds(
      [&] {
        for (int64_t t = 0; t < tokens; ++t) tok = graph.step(tok).argmax(-1);
      },
      wait);
  *captured = graph.captured();
  return static_cast<double>(tokens) / s;
}

}  // namespace fwlab::bench
