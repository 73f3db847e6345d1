// The decay family: add, gated and decay (models/rules/kernel_families.h).
#include <limits>

#include "kernels/decay/decay.h"
#include "models/rules/kernel_families.h"

namespace fwlab {

kernels::RecurrenceResult recur_decay_family(const RuleInputs& in, const RuleRun& run) {
  namespace K = kernels;
  const int64_t head_dim = in.v.size(-1);
  auto values = in.write.defined() ? in.v * in.write : in.v;
  if (run.attn_norm) {
    auto ones = torch::ones({in.v.size(0), in.v.size(1), in.v.size(2), 1}, in.v.options());
    values = torch::cat({values, in.write.defined() ? in.write : ones}, -1);
  }
  const auto S0 = run.state ? run.state->S : torch::Tensor();
  // By device (kernels/decay/dispatch.cpp): CUDA, the chunked tensor-core kernel; CPU, the fused kernel (its
  // backward keeps one state per 16 steps); elsewhere the matmul-friendly libtorch chunked form.
  auto r = run.reference ? K::decay_recurrence_naive(in.fq, in.fk, values, in.log_a, in.log_b, S0)
                         : K::decay_recurrence(in.fq, in.fk, values, in.log_a, in.log_b, S0, run.chunk);
  if (run.attn_norm) {
    const auto den = r.y.narrow(-1, head_dim, 1);
    r.y = r.y.narrow(-1, 0, head_dim) / den.clamp_min(kAttnNormFloor);
  }
  return r;
}

namespace {

// exp(L_t - L_s) for s <= t (0 above the diagonal), L the cumulative log gate: [H, T, D] -> [H, D, T, T].
torch::Tensor decay_between(const torch::Tensor& log_gate) {
  const int64_t T = log_gate.size(1);
  const auto L = log_gate.cumsum(1).transpose(1, 2);
  const auto lag = L.unsqueeze(-1) - L.unsqueeze(-2);
  const auto above = torch::ones({T, T}, torch::kBool).triu(1).to(lag.device());
  return torch::exp(lag.masked_fill(above, -std::numeric_limits<double>::infinity()));
}

}  // namespace

torch::Tensor decay_family_coefficients(const RuleInputs& in, bool attn_norm) {
  // S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T: v_s reaches y_t through the gates of steps s+1..t, so
  // C[i, t, s] = exp(LA_t[i] - LA_s[i]) sum_j q_t[j] k_s[j] exp(LB_t[j] - LB_s[j]), L the cumulative log gates;
  // one batch row at a time ([H, T, T, m] at most).
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < in.fq.size(0); ++b) {
    const auto q = in.fq[b], k = in.fk[b];  // [H, T, m]
    torch::Tensor keys;                     // [H, T, T]
    if (in.log_b.defined())
      keys = (q.transpose(1, 2).unsqueeze(-1) * k.transpose(1, 2).unsqueeze(-2) * decay_between(in.log_b[b])).sum(1);
    else
      keys = torch::matmul(q, k.transpose(1, 2)).tril();
    auto row = keys.unsqueeze(1);                                    // [H, 1, T, T]
    if (in.log_a.defined()) row = row * decay_between(in.log_a[b]);  // [H, 1 or hd, T, T]
    if (in.write.defined())
      row = row * in.write[b].transpose(1, 2).unsqueeze(1);  // the gated rule writes (1 - g_s) v_s
    rows.push_back(row);
  }
  auto c = torch::stack(rows);
  // The normaliser's value row (no value-side decay with attn).
  return attn_norm ? c / c.sum(-1, true).clamp_min(kAttnNormFloor) : c;
}

}  // namespace fwlab
