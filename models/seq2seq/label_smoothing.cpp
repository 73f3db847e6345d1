#include "models/seq2seq/label_smoothing.h"

namespace fwlab {

SmoothedLoss label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, double eps, int64_t ignore) {
  const int64_t V = logits.size(-1);
  auto flat_logits = logits.reshape({-1, V});
  if (flat_logits.scalar_type() != torch::kDouble)
    flat_logits = flat_logits.to(torch::kFloat32);  // the loss in fp32 at least
  auto logp = torch::log_softmax(flat_logits, -1);
  auto flat = target.reshape({-1});
  auto keep = flat.ne(ignore).to(logp.scalar_type());
  auto safe = flat.masked_fill(flat.eq(ignore), 0).unsqueeze(1);
  auto nll = -logp.gather(1, safe).squeeze(1) * keep;
  auto smooth = -logp.sum(1) * keep;
  // fairseq: (1 - eps - eps_i) nll + eps_i smooth with eps_i = eps / (V - 1), which is 1 - eps on the reference
  // (its share of `smooth` included) and eps_i on every other token.
  const double eps_i = V > 1 ? eps / static_cast<double>(V - 1) : 0.0;
  auto loss = (1.0 - eps - eps_i) * nll + eps_i * smooth;
  return {loss.sum(), nll.sum().detach()};
}

}  // namespace fwlab
