// Plain per-timestep references: one libtorch op per term of the recurrence, differentiated by autograd.
// They are the twins the fast forms are tested against, and the step forms used for generation.
#include "kernels/decay/decay.h"
#include "kernels/delta/delta.h"
#include "kernels/sru/sru.h"

namespace fwlab::kernels {

namespace {

torch::Tensor outer_product(const torch::Tensor& a, const torch::Tensor& b) {
  return a.unsqueeze(-1) * b.unsqueeze(-2);
}

torch::Tensor read(const torch::Tensor& S, const torch::Tensor& q) {
  return torch::matmul(S, q.unsqueeze(-1)).squeeze(-1);
}

torch::Tensor zero_state(const torch::Tensor& v, const torch::Tensor& k) {
  return torch::zeros({v.size(0), v.size(1), v.size(-1), k.size(-1)}, v.options());
}

torch::Tensor at_time(const torch::Tensor& x, int64_t t) { return x.defined() ? x.select(2, t) : x; }

}  // namespace

RecurrenceResult decay_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& log_a, const torch::Tensor& log_b,
                                       const torch::Tensor& state) {
  auto S = state.defined() ? state : zero_state(v, k);
  if (log_a.defined()) S = S * log_a.exp().unsqueeze(-1);
  if (log_b.defined()) S = S * log_b.exp().unsqueeze(-2);
  S = S + outer_product(v, k);
  return {read(S, q), S};
}

RecurrenceResult decay_recurrence_naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& log_a, const torch::Tensor& log_b,
                                        const torch::Tensor& state0) {
  auto S = state0;
  std::vector<torch::Tensor> ys;
  for (int64_t t = 0; t < q.size(2); ++t) {
    auto r =
        decay_recurrence_step(q.select(2, t), k.select(2, t), v.select(2, t), at_time(log_a, t), at_time(log_b, t), S);
    ys.push_back(r.y);
    S = r.state;
  }
  return {torch::stack(ys, 2), S.defined() ? S : zero_state(v, k)};
}

RecurrenceResult gated_delta_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const torch::Tensor& alpha, const torch::Tensor& beta,
                                             const torch::Tensor& state) {
  auto S = (state.defined() ? state : zero_state(v, k)) * alpha.unsqueeze(-1);  // decay first (fla's order)
  S = S + outer_product(beta * (v - read(S, k)), k);                            // then the delta update
  return {read(S, q), S};
}

RecurrenceResult gated_delta_recurrence_naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& alpha, const torch::Tensor& beta,
                                              const torch::Tensor& state0) {
  auto S = state0;
  std::vector<torch::Tensor> ys;
  for (int64_t t = 0; t < q.size(2); ++t) {
    auto r = gated_delta_recurrence_step(q.select(2, t), k.select(2, t), v.select(2, t), alpha.select(2, t),
                                         beta.select(2, t), S);
    ys.push_back(r.y);
    S = r.state;
  }
  if (ys.empty())
    return {torch::zeros({v.size(0), v.size(1), 0, v.size(3)}, v.options()), S.defined() ? S : zero_state(v, k)};
  return {torch::stack(ys, 2), S};
}

RecurrenceResult delta_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& beta, const torch::Tensor& state) {
  auto S = state.defined() ? state : zero_state(v, k);
  auto v_old = read(S, k);  // the value currently bound to key k
  S = S + outer_product(beta * (v - v_old), k);
  return {read(S, q), S};
}

RecurrenceResult delta_recurrence_naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& beta, const torch::Tensor& state0) {
  auto S = state0;
  std::vector<torch::Tensor> ys;
  for (int64_t t = 0; t < q.size(2); ++t) {
    auto r = delta_recurrence_step(q.select(2, t), k.select(2, t), v.select(2, t), beta.select(2, t), S);
    ys.push_back(r.y);
    S = r.state;
  }
  return {torch::stack(ys, 2), S.defined() ? S : zero_state(v, k)};
}

RecurrenceResult sru_recurrence_naive(const torch::Tensor& u, const torch::Tensor& x, const torch::Tensor& v_f,
                                      const torch::Tensor& v_r, const torch::Tensor& b_f, const torch::Tensor& b_r,
                                      const torch::Tensor& c0) {
  auto c = c0.defined() ? c0 : torch::zeros({x.size(0), x.size(2)}, x.options());
  std::vector<torch::Tensor> hs;
  for (int64_t t = 0; t < x.size(1); ++t) {
    auto u_t = u.select(1, t);
    auto f = torch::sigmoid(u_t.select(1, 1) + v_f * c + b_f);
    auto r = torch::sigmoid(u_t.select(1, 2) + v_r * c + b_r);
    c = f * c + (1 - f) * u_t.select(1, 0);
    hs.push_back(r * c + (1 - r) * x.select(1, t));
  }
  return {torch::stack(hs, 1), c};
}

}  // namespace fwlab::kernels
