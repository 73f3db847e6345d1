#include "worker/loglikelihood.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "contract/formats/corpus_files.h"

namespace fwlab {

namespace {

std::vector<int64_t> widen(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

// The model's input for one request: (context + continuation)[-(max_length + 1):][:-1], and how many of its
// last positions predict the continuation.
struct Row {
  std::vector<int64_t> input, targets;
};

Row input_row(const EncodedRequest& r, int64_t max_length) {
  const auto n_cont = static_cast<int64_t>(r.continuation.size());
  if (n_cont > max_length)
    throw DataError(
        fmt::format("a continuation of {} tokens does not fit in the model's context of {}", n_cont, max_length));
  std::vector<int64_t> all = r.context;
  all.insert(all.end(), r.continuation.begin(), r.continuation.end());
  const auto keep = std::min<int64_t>(static_cast<int64_t>(all.size()), max_length + 1);
  Row row;
  row.input.assign(all.end() - keep, all.end() - 1);
  row.targets = r.continuation;
  return row;
}

// One batch of rows: the continuation positions' log-probabilities, gathered per row.
void score_batch(GPT& model, const std::vector<const Row*>& rows, std::vector<LlResult*>& out) {
  const auto device = model->wte->weight.device();
  int64_t width = 0;
  for (const auto* r : rows) width = std::max<int64_t>(width, static_cast<int64_t>(r->input.size()));
  auto idx = torch::zeros({static_cast<int64_t>(rows.size()), width}, torch::kLong);
  std::vector<int64_t> at_row, at_pos, target;
  for (size_t b = 0; b < rows.size(); ++b) {
    const auto& in = rows[b]->input;
    idx[static_cast<int64_t>(b)].narrow(0, 0, static_cast<int64_t>(in.size())).copy_(torch::tensor(in, torch::kLong));
    const auto first = static_cast<int64_t>(in.size() - rows[b]->targets.size());
    for (size_t j = 0; j < rows[b]->targets.size(); ++j) {
      at_row.push_back(static_cast<int64_t>(b));
      at_pos.push_back(first + static_cast<int64_t>(j));
      target.push_back(rows[b]->targets[j]);
    }
  }
  const auto features = model->features(idx.to(device));
  const auto picked = features.index({torch::tensor(at_row).to(device), torch::tensor(at_pos).to(device)});
  const auto logp = torch::log_softmax(model->head(picked).to(torch::kCPU, torch::kDouble), -1);
  const auto targets = torch::tensor(target, torch::kLong);
  const auto lp = logp.gather(1, targets.unsqueeze(1)).squeeze(1);
  const auto greedy = logp.argmax(1).eq(targets);
  const auto lp_a = lp.accessor<double, 1>();
  const auto greedy_a = greedy.accessor<bool, 1>();
  for (size_t i = 0; i < at_row.size(); ++i) {
    auto& r = *out[static_cast<size_t>(at_row[i])];
    r.ll += lp_a[static_cast<int64_t>(i)];
    r.greedy = r.greedy && greedy_a[static_cast<int64_t>(i)];
  }
}

}  // namespace

EncodedRequest encode_request(const Tokenizer& tok, const LlRequest& request) {
  const auto r = move_trailing_space(request);
  const auto whole = widen(tok.encode(r.context + r.continuation));
  EncodedRequest e;
  e.context = widen(tok.encode(r.context));
  const auto split = std::min(e.context.size(), whole.size());
  e.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(split), whole.end());
  return e;
}

std::vector<LlResult> score_requests(GPT& model, const std::vector<EncodedRequest>& requests, int64_t batch) {
  torch::NoGradGuard no_grad;
  model->eval();
  // Identical requests (a task whose two choices read the same) are scored once and share the result: scored in
  // different batches they would differ in the last bits, and a tie would be broken by rounding instead of by
  // taking the first choice, as lm-eval's argmax does.
  std::vector<Row> rows;
  std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, size_t> first_of;
  std::vector<size_t> row_of;
  for (const auto& r : requests) {
    auto row = input_row(r, model->config().context);
    const auto [at, inserted] = first_of.try_emplace({row.input, row.targets}, rows.size());
    if (inserted) rows.push_back(std::move(row));
    row_of.push_back(at->second);
  }
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].input.size() > rows[b].input.size(); });
  std::vector<LlResult> unique(rows.size(), LlResult{0.0, true});
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch)) {
    std::vector<const Row*> chunk;
    std::vector<LlResult*> out;
    for (size_t j = i; j < std::min(order.size(), i + static_cast<size_t>(batch)); ++j) {
      chunk.push_back(&rows[order[j]]);
      out.push_back(&unique[order[j]]);
    }
    score_batch(model, chunk, out);
  }
  std::vector<LlResult> results;
  for (const auto row : row_of) results.push_back(unique[row]);
  return results;
}

}  // namespace fwlab
