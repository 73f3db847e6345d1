// SRU and SRU++ as token mixers (NOTES.md, "SRU / SRU++"; Lei 2021). Inside fwlab's pre-LayerNorm block the
// mixer's input x is the normalised residual stream, which is also what the SRU highway carries through.
#include <cmath>
#include <limits>

#include "kernels/sru/sru.h"
#include "models/mixers.h"

namespace fwlab {

namespace {

constexpr double kHighwayBias = -2.0;  // b_r initialisation of SRU++

torch::nn::Linear xavier_linear(int64_t in, int64_t out) {
  torch::nn::Linear layer(torch::nn::LinearOptions(in, out).bias(false));
  torch::nn::init::xavier_uniform_(layer->weight);
  return layer;
}

}  // namespace

Sru::Sru(const MixerSpec& s, const ModelConfig& cfg)
    : spec(s), d_model_(cfg.d_model), attn_dim_(s.attn_dim > 0 ? s.attn_dim : cfg.d_model / 4) {
  const int64_t d = cfg.d_model;
  if (s.kind == "sru") {
    w = register_module("w", xavier_linear(d, 3 * d));
  } else {
    w1 = register_module("w1", xavier_linear(d, attn_dim_));
    w3 = register_module("w3", xavier_linear(attn_dim_, 3 * d));
    if (s.attention) {
      w2 = register_module("w2", xavier_linear(attn_dim_, 2 * attn_dim_));
      ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({attn_dim_})));
      alpha = register_parameter("alpha", torch::zeros({1}));  // starts as a plain projection (SRU++ sec. 3)
    }
  }
  v_f = register_parameter("v_f", torch::empty({d}).uniform_(-1.0, 1.0));
  v_r = register_parameter("v_r", torch::empty({d}).uniform_(-1.0, 1.0));
  b_f = register_parameter("b_f", torch::zeros({d}));
  b_r = register_parameter("b_r", torch::full({d}, kHighwayBias));
  resid_drop = register_module("resid_drop", Dropout(cfg.dropout));
}

torch::Tensor Sru::attend(const torch::Tensor& q, MixerState* state) {
  // Single-head causal softmax attention on the projected input Q ([B, T, d']); K and V come from Q.
  auto kv = w2(q).chunk(2, -1);
  auto k = kv[0], v = kv[1];
  const double scale = 1.0 / std::sqrt(static_cast<double>(attn_dim_));
  if (state) {
    state->k = state->k.defined() ? torch::cat({state->k, k}, 1) : k;
    state->v = state->v.defined() ? torch::cat({state->v, v}, 1) : v;
    auto scores = torch::matmul(q, state->k.transpose(-1, -2)) * scale;  // T = 1: every cached key is visible
    return torch::matmul(torch::softmax(scores, -1), state->v);
  }
  const int64_t T = q.size(1);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
  auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

torch::Tensor Sru::run(const torch::Tensor& x, MixerState* state) {
  const int64_t B = x.size(0), T = x.size(1);
  torch::Tensor u;
  if (spec.kind == "sru") {
    u = w(x);
  } else {
    auto q = w1(x);
    u = spec.attention ? w3(ln(q + alpha * attend(q, state))) : w3(q);
  }
  const auto c0 = state ? state->c : torch::Tensor();
  const auto U = u.view({B, T, 3, d_model_});
  auto r = reference_kernels_ ? kernels::sru_recurrence_naive(U, x, v_f, v_r, b_f, b_r, c0)
                              : kernels::sru_recurrence_fused(U, x, v_f, v_r, b_f, b_r, c0);
  if (state) state->c = r.state;
  record_state(r.state);
  return resid_drop(r.y);
}

torch::Tensor Sru::forward(const torch::Tensor& x) { return run(x, nullptr); }

torch::Tensor Sru::step(const torch::Tensor& x, MixerState& state) { return run(x.unsqueeze(1), &state).squeeze(1); }

}  // namespace fwlab
