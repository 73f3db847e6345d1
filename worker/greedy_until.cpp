#include "worker/greedy_until.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace fwlab {

namespace {

struct GreedyRow {
  std::vector<int64_t> prompt, generated;
  std::string text;
  bool done = false;
};

// Rows run together until each has its tokens or its stop string.
void run_rows(GPT& model, const Tokenizer& tok, std::vector<GreedyRow*>& rows, const GreedyOptions& o) {
  const auto device = model->wte->weight.device();
  GenerationState state;
  size_t longest = 0;
  for (const auto* r : rows) longest = std::max(longest, r->prompt.size());
  for (size_t t = 0; t < longest + static_cast<size_t>(o.max_new_tokens); ++t) {
    std::vector<int64_t> feed(rows.size());
    bool any = false;
    for (size_t b = 0; b < rows.size(); ++b) {
      const auto& r = *rows[b];
      feed[b] = t < r.prompt.size() ? r.prompt[t] : (r.generated.empty() ? r.prompt.back() : r.generated.back());
      any = any || !r.done;
    }
    if (!any) break;
    const auto next = model->step(torch::tensor(feed, torch::kLong).to(device), state).argmax(-1).to(torch::kCPU);
    for (size_t b = 0; b < rows.size(); ++b) {
      auto& r = *rows[b];
      if (r.done || t + 1 < r.prompt.size()) continue;  // still reading its prompt
      r.generated.push_back(next[static_cast<int64_t>(b)].item<int64_t>());
      r.text = tok.decode({r.generated.begin(), r.generated.end()});
      const auto stop_at = o.stop.empty() ? std::string::npos : r.text.find(o.stop);
      if (stop_at != std::string::npos) r.text.resize(stop_at);
      r.done = stop_at != std::string::npos || static_cast<int64_t>(r.generated.size()) >= o.max_new_tokens;
    }
  }
}

}  // namespace

std::vector<std::string> greedy_until(GPT& model, const Tokenizer& tok,
                                      const std::vector<std::vector<int64_t>>& prompts, const GreedyOptions& o) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto keep = std::max<int64_t>(1, model->config().context - o.max_new_tokens);
  std::vector<GreedyRow> rows(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    if (p.empty()) throw std::invalid_argument("greedy_until: an empty prompt");
    const auto n = std::min<int64_t>(static_cast<int64_t>(p.size()), keep);
    rows[i].prompt.assign(p.end() - n, p.end());
  }
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].prompt.size() > rows[b].prompt.size(); });
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(o.batch)) {
    std::vector<GreedyRow*> batch;
    for (size_t j = i; j < std::min(order.size(), i + static_cast<size_t>(o.batch)); ++j)
      batch.push_back(&rows[order[j]]);
    run_rows(model, tok, batch, o);
  }
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.text);
  return out;
}

}  // namespace fwlab
