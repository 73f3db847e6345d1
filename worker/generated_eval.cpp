#include "worker/generated_eval.h"

#include "kernels/common/recurrence.h"
#include "text/batches/mqar.h"
#include "text/batches/retrieval.h"
#include "text/corpora/dataset.h"
#include "worker/precision.h"

namespace fwlab {

namespace {

// Per row of one batch: queries, correct answers and summed loss (the labelled positions' row indexes come in
// the row-major order labelled_logits returns them in).
void score_rows(const torch::Tensor& logits, const torch::Tensor& t, const torch::Tensor& y, int64_t batch,
                const MqarPoint& point, std::vector<SequenceScore>& out) {
  const int64_t B = y.size(0);
  const auto rows = torch::div((y.reshape({-1}) >= 0).nonzero().squeeze(1), y.size(1), "floor").cpu();
  const auto losses = torch::nn::functional::cross_entropy(
      logits, t, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  const auto right = (logits.argmax(-1) == t).cpu().to(torch::kFloat64);
  const auto zeros = torch::zeros({B}, torch::kFloat64);
  const auto nll = zeros.index_add(0, rows, losses.cpu().to(torch::kFloat64));
  const auto correct = zeros.index_add(0, rows, right);
  const auto queries = zeros.index_add(0, rows, torch::ones_like(right));
  const auto q = queries.accessor<double, 1>(), c = correct.accessor<double, 1>(), l = nll.accessor<double, 1>();
  for (int64_t b = 0; b < B; ++b)
    out.push_back({point, batch, static_cast<int64_t>(q[b]), static_cast<int64_t>(c[b]), l[b]});
}

}  // namespace

torch::Tensor token_tensor(const std::vector<int32_t>& ids, int64_t rows, int64_t cols, torch::Device device) {
  return torch::from_blob(const_cast<int32_t*>(ids.data()), {rows, cols}, torch::kInt32).to(device, torch::kLong);
}

std::pair<torch::Tensor, torch::Tensor> task_batch(const DataSpec& d, const MqarPoint& point, int64_t B, uint64_t seed,
                                                   torch::Device device) {
  auto b = d.source == "mqar" ? make_mqar_batch(d.mqar.at(point), B, seed) : make_retrieval_batch(d.retrieval, B, seed);
  return {token_tensor(b.inputs, B, b.len, device), token_tensor(b.targets, B, b.len, device)};
}

std::vector<SequenceScore> score_generated_batches(GPT& model, const JobSpec& spec, torch::Device device,
                                                   uint64_t stream) {
  torch::NoGradGuard guard;
  model->eval();
  std::vector<SequenceScore> out;
  const auto points = spec.data.mqar.eval_points();  // taken in turn
  for (int64_t i = 0; i < spec.eval.mqar_batches; ++i) {
    const auto& point = points[static_cast<size_t>(i) % points.size()];
    auto [x, y] = task_batch(spec.data, point, spec.train.batch_size,
                             mix_seed(spec.seed, stream, static_cast<uint64_t>(i)), device);
    torch::Tensor logits, t;
    {
      const AutocastScope amp(spec.train.precision, device);
      std::tie(logits, t) = model->labelled_logits(x, y);
    }
    score_rows(kernels::widened_to_fp32(logits), t, y, i, point, out);
  }
  model->train();
  return out;
}

}  // namespace fwlab
