// Causal multi-head softmax attention (GPT-2) and its sliding-window variant (Mao Table 2's local attention).
#include <algorithm>
#include <cmath>
#include <limits>

#include "models/mixers.h"

#include <torch/version.h>

namespace fwlab {

double Mixer::last_state_max_abs() const {
  return last_state_.defined() && last_state_.numel() > 0 ? last_state_.abs().max().item<double>() : 0.0;
}

void init_gpt2_linear(torch::nn::Linear& layer, double std) {
  torch::NoGradGuard guard;
  layer->weight.normal_(0.0, std);
  if (layer->bias.defined()) layer->bias.zero_();
}

SoftmaxAttention::SoftmaxAttention(const ModelConfig& cfg, int64_t window)
    : n_heads_(cfg.n_heads), head_dim_(cfg.head_dim), window_(window) {
  const int64_t inner = cfg.n_heads * cfg.head_dim;
  qkv = register_module("qkv", torch::nn::Linear(cfg.d_model, 3 * inner));
  o = register_module("o", torch::nn::Linear(inner, cfg.d_model));
  attn_drop = register_module("attn_drop", Dropout(cfg.dropout));
  resid_drop = register_module("resid_drop", Dropout(cfg.dropout));
  init_gpt2_linear(qkv);
  init_gpt2_linear(o, 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers)));  // GPT-2's residual scaling
  add_lora(*this, cfg, qkv_lora, o_lora);
}

void add_lora(torch::nn::Module& owner, const ModelConfig& cfg, LoraAdapter& qkv_lora, LoraAdapter& o_lora) {
  if (cfg.lora_rank <= 0) return;
  const int64_t d = cfg.d_model, inner = cfg.n_heads * cfg.head_dim, r = cfg.lora_rank;
  qkv_lora = owner.register_module("qkv_lora", LoraAdapter(3, d, inner, r, cfg.lora_scale()));  // q, k, v apart
  o_lora = owner.register_module("o_lora", LoraAdapter(1, inner, d, r, cfg.lora_scale()));
}

torch::Tensor SoftmaxAttention::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1);
  auto parts = with_lora(qkv, qkv_lora, x).view({B, T, 3, n_heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  auto q = parts[0], k = parts[1], v = parts[2];  // [B, H, T, hd]
#if TORCH_VERSION_MAJOR >= 2
  // On CUDA, libtorch's fused attention (flash / memory-efficient kernels; PyTorch 2.0 on): the strong baseline
  // the recurrent mixers are measured against. Same dropout probability; its masks are drawn differently.
  if (q.is_cuda()) {
    const double p = is_training() ? attn_drop->p() : 0.0;
    torch::Tensor y;
    if (window_ == 0) {
      y = at::scaled_dot_product_attention(q, k, v, {}, p, /*is_causal=*/true);
    } else {
      auto pos = torch::arange(T, x.options().dtype(torch::kLong));
      auto lag = pos.unsqueeze(1) - pos.unsqueeze(0);
      y = at::scaled_dot_product_attention(q, k, v, (lag >= 0) & (lag < window_), p, false);  // true: attend
    }
    return resid_drop(with_lora(o, o_lora, y.transpose(1, 2).reshape({B, T, n_heads_ * head_dim_})));
  }
#endif
  auto y = torch::matmul(attn_drop(softmax_weights(q, k, window_)), v);
  return resid_drop(with_lora(o, o_lora, y.transpose(1, 2).reshape({B, T, n_heads_ * head_dim_})));
}

torch::Tensor softmax_weights(const torch::Tensor& q, const torch::Tensor& keys, int64_t window) {
  const int64_t T = q.size(2), L = keys.size(2), earlier = L - T;
  auto query_pos = torch::arange(earlier, L, q.options().dtype(torch::kLong)), key_pos = torch::arange(L, q.options().dtype(torch::kLong));
  auto lag = query_pos.unsqueeze(1) - key_pos.unsqueeze(0);  // query - key, [T, L]
  auto hidden = lag < 0;
  if (window > 0) hidden = hidden | (lag >= window);
  auto scores = torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  return torch::softmax(scores.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1);
}

torch::Tensor SoftmaxAttention::value_coefficients(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1);
  auto parts = with_lora(qkv, qkv_lora, x).view({B, T, 3, n_heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  return softmax_weights(parts[0], parts[1], window_).unsqueeze(2);  // [B, H, 1, T, T]
}

namespace {

// Writes `token` [B, H, 1, hd] after the `cache` view of `buffer`, doubling the buffer when it is full.
void append_to_cache(torch::Tensor& buffer, torch::Tensor& cache, const torch::Tensor& token) {
  const int64_t used = cache.defined() ? cache.size(2) : 0;
  if (!buffer.defined() || buffer.size(2) == used) {
    auto sizes = token.sizes().vec();
    sizes[2] = std::max<int64_t>(16, 2 * used);
    auto grown = torch::empty(sizes, token.options());
    if (used > 0) grown.narrow(2, 0, used).copy_(cache);
    buffer = grown;
  }
  buffer.narrow(2, used, 1).copy_(token);
  cache = buffer.narrow(2, 0, used + 1);
}

}  // namespace

torch::Tensor SoftmaxAttention::step(const torch::Tensor& x, MixerState& state) {
  const int64_t B = x.size(0);
  auto parts = with_lora(qkv, qkv_lora, x).view({B, 3, n_heads_, head_dim_});
  auto q = parts.select(1, 0), k = parts.select(1, 1).unsqueeze(2), v = parts.select(1, 2).unsqueeze(2);
  if (window_ > 0) {  // the local cache keeps the last `window` tokens only
    state.k = state.k.defined() ? torch::cat({state.k, k}, 2) : k;  // [B, H, t, hd]
    state.v = state.v.defined() ? torch::cat({state.v, v}, 2) : v;
    if (state.k.size(2) > window_) {
      state.k = state.k.narrow(2, state.k.size(2) - window_, window_).contiguous();
      state.v = state.v.narrow(2, state.v.size(2) - window_, window_).contiguous();
    }
  } else {
    append_to_cache(state.k_buffer, state.k, k);
    append_to_cache(state.v_buffer, state.v, v);
  }
  auto scores = torch::matmul(q.unsqueeze(2), state.k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim_));
  auto y = torch::matmul(torch::softmax(scores, -1), state.v).squeeze(2);  // [B, H, hd]
  return with_lora(o, o_lora, y.reshape({B, n_heads_ * head_dim_}));
}

}  // namespace fwlab
