// Text generation with the step form of every mixer: the KV cache for softmax / local attention, the O(1) state
// of fast-weight and SRU layers. Device-agnostic: tokens follow the model's device, sampling happens on the CPU
// with its own generator so that a seed gives the same text on any device.
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt.h"

namespace fwlab {

struct SamplingOptions {
  int64_t tokens = 32;       // new tokens
  bool greedy = false;       // arg-max (deterministic); otherwise sample
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: the whole vocabulary
  uint64_t seed = 0;
};

struct Generation {
  std::vector<int64_t> tokens;  // the continuation only
  double prefill_s = 0.0;       // feeding the prompt
  double decode_s = 0.0;        // producing the new tokens
  int64_t state_bytes = 0;      // carried per sequence at the end (KV caches, fast weights, SRU cells)
};

// Bytes of the state of all layers.
int64_t state_bytes(const GenerationState& state);

// Feeds `prompt` (at least one token) through the step form, then produces options.tokens tokens; stops early at
// the model's context. The model is switched to eval mode.
Generation generate(GPT& model, const std::vector<int64_t>& prompt, const SamplingOptions& options);

// The next token from logits [vocab] (float), by the options' rule; `gen` is the CPU generator of the run.
int64_t choose_token(const torch::Tensor& logits, const SamplingOptions& options, at::Generator& gen);

}  // namespace fwlab
