// Fast-weight mixers (NOTES.md, "Update rules"). Shapes: B batch, T time, H heads, hd head dim, m features.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/recurrences.h"
#include "models/mixers.h"

namespace fwlab {

namespace {

// T2R clamps the attention-normalization denominator from below at 1e-2 (NOTES.md).
constexpr double kAttnNormFloor = 1e-2;
// Sum normalization (Schlag et al.) divides by the feature sum. The small constant only keeps an all-zero
// ReLU feature vector at 0 instead of NaN; a signed map can still drive the sum to ~0, which is the documented
// instability of "delta without feature map" that the tables must be able to show.
constexpr double kSumNormEps = 1e-6;
// Mao (sec. 4, footnote 3) initialises the delta rule's write strength near 0.007.
constexpr double kDeltaBetaInit = 0.007;

// Chunk length of the parallel form when the spec leaves it at 0. With an elementwise value-side decay the
// intra-chunk term is a [C, C, head_dim] product, cheapest at small C (measured with fwlab-bench-train-step);
// without it the intra-chunk term is a matmul and longer chunks mean fewer sequential state updates.
int64_t default_chunk(const MixerSpec& spec) { return spec.chunk > 0 ? spec.chunk : spec.rule == "decay" ? 8 : 32; }

// Uniform Gate Initialization (Gu et al. 2020): u ~ U[1/n, 1 - 1/n], b = logit(u), n = the gate's width.
void uniform_gate_init(torch::Tensor& bias) {
  torch::NoGradGuard guard;
  const double n = static_cast<double>(bias.numel());
  const double lo = n > 2 ? 1.0 / n : 0.25, hi = 1.0 - lo;
  auto u = torch::empty_like(bias).uniform_(lo, hi);
  bias.copy_(torch::log(u) - torch::log1p(-u));
}

torch::Tensor heads(const torch::Tensor& x, int64_t n_heads) {  // [B, T, H*e] -> [B, H, T, e]
  return x.view({x.size(0), x.size(1), n_heads, -1}).transpose(1, 2);
}

// Softmax attention of q over the last `window` keys, [B, H, T, hd]. With a state, the keys and values of up to
// window - 1 earlier tokens come from it and it keeps the last `window` after: the step form's O(window) cache.
torch::Tensor window_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t window, MixerState* state) {
  auto keys = k, values = v;
  if (state && state->k.defined()) keys = torch::cat({state->k, k}, 2), values = torch::cat({state->v, v}, 2);
  const int64_t L = keys.size(2);
  if (state) {
    const int64_t keep = std::min(L, window);
    state->k = keys.narrow(2, L - keep, keep).contiguous(), state->v = values.narrow(2, L - keep, keep).contiguous();
  }
  return torch::matmul(softmax_weights(q, keys, window), values);
}

// In fp32 under mixed precision (a normaliser in bf16 keeps 3 significant digits).
torch::Tensor sum_normalize(const torch::Tensor& phi_in) {
  const auto phi = kernels::widened_to_fp32(phi_in);
  return phi / (phi.sum(-1, true) + kSumNormEps);
}

}  // namespace

FastWeight::FastWeight(const MixerSpec& s, const ModelConfig& cfg)
    : spec(s), n_heads_(cfg.n_heads), head_dim_(cfg.head_dim) {
  const int64_t d = cfg.d_model, inner = cfg.n_heads * cfg.head_dim;
  qkv = register_module("qkv", torch::nn::Linear(d, 3 * inner));
  o = register_module("o", torch::nn::Linear(inner, d));
  init_gpt2_linear(qkv);
  init_gpt2_linear(o, 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers)));
  phi = register_module("phi", std::make_shared<FeatureMap>(s, cfg.n_heads, cfg.head_dim));
  // New gate weights keep torch.nn.Linear's default initialisation; only the biases follow the papers.
  if (s.rule == "gated" || s.rule == "delta") {
    gate = register_module("gate", torch::nn::Linear(d, cfg.n_heads));
    torch::NoGradGuard guard;
    if (s.rule == "gated") {
      // NOTES gives no initialisation for the gated rule's bias; we use the UGI of the decay rule's gates.
      uniform_gate_init(gate->bias);
    } else {
      gate->bias.fill_(std::log(kDeltaBetaInit / (1.0 - kDeltaBetaInit)));
    }
  }
  if (s.rule == "decay") {
    decay_z = register_module("decay_z", torch::nn::Linear(d, inner));
    decay_f = register_module("decay_f", torch::nn::Linear(d, cfg.n_heads * s.m));
    uniform_gate_init(decay_z->bias);
    uniform_gate_init(decay_f->bias);
  }
  resid_drop = register_module("resid_drop", Dropout(cfg.dropout));
  apply_value_rescale();
  add_lora(*this, cfg, qkv_lora, o_lora);  // last: a model without LoRA draws the same initial weights as before
}

torch::Tensor FastWeight::value_rescale() const {
  if (spec.rule == "decay") return 1.0 - torch::sigmoid(decay_z->bias.detach());
  if (spec.rule == "add" && spec.feature_map == "identity" && spec.norm == "none")
    return torch::full({n_heads_ * head_dim_}, 1.0 / 512.0, qkv->weight.options());
  return {};
}

void FastWeight::apply_value_rescale() {
  auto factor = value_rescale();
  if (!factor.defined()) return;
  torch::NoGradGuard guard;
  const int64_t inner = n_heads_ * head_dim_;
  qkv->weight.narrow(0, 2 * inner, inner).mul_(factor.unsqueeze(1));
  qkv->bias.narrow(0, 2 * inner, inner).mul_(factor);
}

void FastWeight::fold_feature_map() {
  TORCH_CHECK(phi->is_projection(), "only the relu and identity feature maps can be folded, not ", spec.feature_map);
  TORCH_CHECK(!qkv_lora, "merge the LoRA adapters (merge_lora) before folding the feature map");
  TORCH_CHECK(spec.swa_window == 0, "a layer with a sliding window reads q and k themselves: its feature map cannot be folded");
  TORCH_CHECK(!folded(), "feature map already folded");
  torch::NoGradGuard guard;
  const int64_t d = qkv->weight.size(1), inner = n_heads_ * head_dim_, m = spec.m;
  auto fold = [&](int64_t block, double scale) {
    auto w = qkv->weight.narrow(0, block * inner, inner).view({n_heads_, head_dim_, d}) * scale;
    auto b = qkv->bias.narrow(0, block * inner, inner).view({n_heads_, head_dim_, 1}) * scale;
    auto w_folded = torch::matmul(phi->weight, w);                // [H, m, d]
    auto b_folded = torch::matmul(phi->weight, b).squeeze(-1);    // [H, m]
    if (phi->bias.defined()) b_folded = b_folded + phi->bias;
    return std::make_pair(w_folded.reshape({n_heads_ * m, d}), b_folded.reshape({n_heads_ * m}));
  };
  auto [wq, bq] = fold(0, phi->query_scale());
  auto [wk, bk] = fold(1, 1.0);
  folded_qk = register_module("folded_qk", torch::nn::Linear(d, 2 * n_heads_ * m));
  folded_qk->to(qkv->weight.device(), qkv->weight.scalar_type());
  folded_qk->weight.copy_(torch::cat({wq, wk}, 0));
  folded_qk->bias.copy_(torch::cat({bq, bk}, 0));
}

torch::Tensor FastWeight::forward(const torch::Tensor& x) { return run(x, nullptr, reference_kernels_); }

torch::Tensor FastWeight::step(const torch::Tensor& x, MixerState& state) {
  // One token is a sequence of length 1 continuing from `state`, O(1) per token. The fused CPU kernels take
  // about 7 us a step against 20 us for the per-timestep ops (B1 H4 D64 M32), so they serve the step form too.
  return run(x.unsqueeze(1), &state, reference_kernels_).squeeze(1);
}

FastWeight::Inputs FastWeight::inputs(const torch::Tensor& x) {
  namespace K = kernels;
  const int64_t B = x.size(0), T = x.size(1), inner = n_heads_ * head_dim_;
  Inputs in;
  if (folded()) {
    auto qk = folded_qk(x).view({B, T, 2, n_heads_ * spec.m});
    in.fq = phi->activate(heads(qk.select(2, 0), n_heads_));
    in.fk = phi->activate(heads(qk.select(2, 1), n_heads_));
    in.v = heads(torch::linear(x, qkv->weight.narrow(0, 2 * inner, inner), qkv->bias.narrow(0, 2 * inner, inner)),
                 n_heads_);
  } else {
    auto parts = with_lora(qkv, qkv_lora, x).view({B, T, 3, inner});
    in.fq = phi->forward(heads(parts.select(2, 0), n_heads_), true);
    in.fk = phi->forward(heads(parts.select(2, 1), n_heads_), false);
    in.v = heads(parts.select(2, 2), n_heads_);
    in.q_raw = heads(parts.select(2, 0), n_heads_), in.k_raw = heads(parts.select(2, 1), n_heads_);
  }
  if (spec.norm == "attn") in.fq = K::widened_to_fp32(in.fq);  // the normaliser rides in the recurrence: fp32 under mixed precision
  if (spec.rule == "delta") {
    in.fq = sum_normalize(in.fq);
    in.fk = sum_normalize(in.fk);
    in.beta = torch::sigmoid(heads(gate(x), n_heads_));  // [B, H, T, 1]
  } else if (spec.rule == "gated") {
    const auto g_logit = K::widened_to_fp32(heads(gate(x), n_heads_));  // [B, H, T, 1]; gates in fp32 under mixed precision
    in.log_a = torch::log_sigmoid(g_logit);
    in.write = torch::sigmoid(-g_logit);  // (1 - g_t) v_t
  } else if (spec.rule == "decay") {
    in.log_a = torch::log_sigmoid(K::widened_to_fp32(heads(decay_z(x), n_heads_)));  // fp32 under mixed precision
    in.log_b = torch::log_sigmoid(K::widened_to_fp32(heads(decay_f(x), n_heads_)));
  }
  return in;
}

torch::Tensor FastWeight::run(const torch::Tensor& x, MixerState* state, bool reference) {
  namespace K = kernels;
  const int64_t B = x.size(0), T = x.size(1), inner = n_heads_ * head_dim_;
  if (is_training() && spec.feature_map == "rfa") phi->resample();
  const auto in = inputs(x);
  const bool attn_norm = spec.norm == "attn";
  const auto S0 = state ? state->S : torch::Tensor();
  K::RecurrenceResult r;
  torch::Tensor den;

  if (spec.rule == "delta") {
    r = reference ? K::delta_recurrence_naive(in.fq, in.fk, in.v, in.beta, S0) : K::delta_recurrence_fused(in.fq, in.fk, in.v, in.beta, S0);
    if (attn_norm) {  // the additive normaliser z_t = z_{t-1} + phi'(k_t)
      auto z = in.fk.cumsum(2);
      if (state && state->z.defined()) z = z + state->z.unsqueeze(2);
      den = (z * in.fq).sum(-1, true);
      if (state) state->z = z.select(2, T - 1);
    }
  } else {
    // With attention normalization the normaliser z follows the same recurrence as S with a value of 1
    // (for the gated rule: z_t = g_t z_{t-1} + (1 - g_t) phi(k_t)), so it rides along as an extra value row.
    auto values = in.write.defined() ? in.v * in.write : in.v;
    if (attn_norm) values = torch::cat({values, in.write.defined() ? in.write : torch::ones({B, n_heads_, T, 1}, in.v.options())}, -1);
    // By device (kernels/decay/dispatch.cpp): CUDA, the chunked tensor-core kernel; CPU, the fused kernel (its
    // backward keeps one state per 16 steps); elsewhere the matmul-friendly libtorch chunked form.
    r = reference ? K::decay_recurrence_naive(in.fq, in.fk, values, in.log_a, in.log_b, S0)
                  : K::decay_recurrence(in.fq, in.fk, values, in.log_a, in.log_b, S0, default_chunk(spec));
    if (attn_norm) {
      den = r.y.narrow(-1, head_dim_, 1);
      r.y = r.y.narrow(-1, 0, head_dim_);
    }
  }
  auto y = attn_norm ? r.y / den.clamp_min(kAttnNormFloor) : r.y;
  if (spec.swa_window > 0) y = 0.5 * (y + window_softmax(in.q_raw, in.k_raw, in.v, spec.swa_window, state));  // Liger's mix
  if (state) state->S = r.state;
  record_state(r.state);
  return resid_drop(with_lora(o, o_lora, y.transpose(1, 2).reshape({B, T, inner})));
}

torch::Tensor FastWeight::value_coefficients(const torch::Tensor& x) {
  namespace K = kernels;
  TORCH_CHECK(!folded(), "value_coefficients reads the unfolded projections");
  const int64_t B = x.size(0), T = x.size(1);
  const auto in = inputs(x);
  torch::Tensor c, den;  // c: [B, H, channels, T, T]
  if (spec.rule == "delta") {
    // y is linear in the values: the coefficient of v_s in y_t is what the layer's own recurrence returns when
    // position s writes the one-hot value e_s (delta's overwrites have no closed form as short as this).
    const auto probe = torch::eye(T, in.fq.options()).expand({B, n_heads_, T, T}).contiguous();
    c = K::delta_recurrence_naive(in.fq, in.fk, probe, in.beta, {}).y.unsqueeze(2);
    if (spec.norm == "attn") den = (in.fk.cumsum(2) * in.fq).sum(-1, true).unsqueeze(2);
  } else {
    // S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T: v_s reaches y_t through the gates of steps s+1..t, so
    // C[i, t, s] = exp(LA_t[i] - LA_s[i]) sum_j q_t[j] k_s[j] exp(LB_t[j] - LB_s[j]), L the cumulative log gates;
    // one batch row at a time ([H, T, T, m] at most).
    const auto after = [&](const torch::Tensor& log_gate) {  // [H, T, D] -> exp(L_t - L_s) for s <= t, [H, D, T, T]
      const auto L = log_gate.cumsum(1).transpose(1, 2);
      const auto lag = L.unsqueeze(-1) - L.unsqueeze(-2);
      return torch::exp(lag.masked_fill(torch::ones({T, T}, torch::kBool).triu(1).to(lag.device()), -std::numeric_limits<double>::infinity()));
    };
    std::vector<torch::Tensor> rows;
    for (int64_t b = 0; b < B; ++b) {
      const auto q = in.fq[b], k = in.fk[b];  // [H, T, m]
      torch::Tensor keys;                     // [H, T, T]
      if (in.log_b.defined()) keys = (q.transpose(1, 2).unsqueeze(-1) * k.transpose(1, 2).unsqueeze(-2) * after(in.log_b[b])).sum(1);
      else keys = torch::matmul(q, k.transpose(1, 2)).tril();
      auto row = keys.unsqueeze(1);  // [H, 1, T, T]
      if (in.log_a.defined()) row = row * after(in.log_a[b]);  // [H, 1 or hd, T, T]
      if (in.write.defined()) row = row * in.write[b].transpose(1, 2).unsqueeze(1);  // the gated rule writes (1 - g_s) v_s
      rows.push_back(row);
    }
    c = torch::stack(rows);
    if (spec.norm == "attn") den = c.sum(-1, true);  // the normaliser's value row (no value-side decay with attn)
  }
  if (den.defined()) c = c / den.clamp_min(kAttnNormFloor);
  if (spec.swa_window > 0) c = 0.5 * (c + softmax_weights(in.q_raw, in.k_raw, spec.swa_window).unsqueeze(2));
  return c;
}

}  // namespace fwlab
