#include "models/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <stdexcept>

namespace fwlab {

int64_t state_bytes(const GenerationState& state) {
  int64_t n = 0;
  for (const auto& l : state.layers)
    for (const auto& t : {l.S, l.z, l.c, l.k, l.v, l.conv}) n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return n;
}

int64_t choose_token(const torch::Tensor& logits, const SamplingOptions& o, at::Generator& gen) {
  auto x = logits.detach().to(torch::kCPU, torch::kFloat64);
  if (o.greedy) return x.argmax().item<int64_t>();
  x = x / o.temperature;
  if (o.top_k > 0 && o.top_k < x.size(0)) {
    // Keep the k largest (ties at the k-th value kept too, as Hugging Face's top-k filter does).
    const auto kth = std::get<0>(x.topk(o.top_k)).min();
    x = x.masked_fill(x < kth, -std::numeric_limits<double>::infinity());
  }
  return torch::multinomial(torch::softmax(x, 0), 1, false, gen).item<int64_t>();
}

Generation generate(GPT& model, const std::vector<int64_t>& prompt, const SamplingOptions& o) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt holds no token");
  if (!o.greedy && !(o.temperature > 0.0))
    throw std::invalid_argument(fmt::format("generate: temperature must be > 0, got {}", o.temperature));
  const auto device = model->wte->weight.device();
  // Learned positions end at the context; rotary or no positions go on (models/gpt.h: bounded_positions).
  const int64_t context =
      model->config().bounded_positions() ? model->config().context : std::numeric_limits<int64_t>::max();
  torch::NoGradGuard guard;
  model->eval();
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  GenerationState state;
  Generation out;
  using clock = std::chrono::steady_clock;
  auto token = [&](int64_t id) {
    return torch::full({1}, id, torch::TensorOptions().dtype(torch::kLong).device(device));
  };
  auto t0 = clock::now();
  torch::Tensor logits;
  for (size_t i = 0; i < prompt.size() && state.position < context; ++i) logits = model->step(token(prompt[i]), state);
  auto t1 = clock::now();
  out.prefill_s = std::chrono::duration<double>(t1 - t0).count();
  for (int64_t n = 0; n < o.tokens; ++n) {
    const int64_t next = choose_token(logits[0], o, gen);
    out.tokens.push_back(next);
    if (n + 1 == o.tokens || state.position >= context) break;
    logits = model->step(token(next), state);
  }
  out.decode_s = std::chrono::duration<double>(clock::now() - t1).count();
  out.state_bytes = state_bytes(state);
  return out;
}

}  // namespace fwlab
