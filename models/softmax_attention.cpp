// Causal multi-head softmax attention (GPT-2, Llama with grouped-query heads) and its sliding-window variants
// (Mao Table 2's local attention; Mistral's sliding window).
#include <algorithm>
#include <cmath>
#include <limits>

#include "models/mixers.h"

#include <torch/version.h>

namespace fwlab {

double Mixer::last_state_max_abs() const {
  return last_state_.defined() && last_state_.numel() > 0 ? last_state_.abs().max().item<double>() : 0.0;
}

SoftmaxAttention::SoftmaxAttention(const ModelConfig& cfg, int64_t window)
    : AttentionMixer(cfg), window_(window > 0 ? window : cfg.attention_window) {
  attn_drop = register_module("attn_drop", Dropout(cfg.dropout));
  resid_drop = register_module("resid_drop", Dropout(cfg.dropout));
  add_lora(cfg);
}

torch::Tensor SoftmaxAttention::forward(const torch::Tensor& x) {
  auto h = project(x, 0);
#if TORCH_VERSION_MAJOR >= 2
  if (h.q.is_cuda()) return resid_drop(output(fused_cuda(h)));
#endif
  auto k = repeat_kv(h.k, groups()), v = repeat_kv(h.v, groups());
  return resid_drop(output(blocked_causal_attention(h.q, k, v, window_, attn_drop)));
}

#if TORCH_VERSION_MAJOR >= 2
// On CUDA, libtorch's fused attention (flash / memory-efficient kernels; PyTorch 2.0 on): the strong baseline
// the recurrent mixers are measured against. Same dropout probability; its masks are drawn differently.
torch::Tensor SoftmaxAttention::fused_cuda(const QkvHeads& h) {
  const double p = is_training() ? attn_drop->p() : 0.0;
  auto k = repeat_kv(h.k, groups()), v = repeat_kv(h.v, groups());
  if (window_ == 0) return at::scaled_dot_product_attention(h.q, k, v, {}, p, /*is_causal=*/true);
  auto pos = torch::arange(h.q.size(2), h.q.options().dtype(torch::kLong));
  auto lag = pos.unsqueeze(1) - pos.unsqueeze(0);
  return at::scaled_dot_product_attention(h.q, k, v, (lag >= 0) & (lag < window_), p, false);  // true: attend
}
#else
torch::Tensor SoftmaxAttention::fused_cuda(const QkvHeads&) { TORCH_CHECK(false, "fused attention needs PyTorch 2"); }
#endif

torch::Tensor softmax_weights(const torch::Tensor& q, const torch::Tensor& keys, int64_t window) {
  const int64_t T = q.size(2), L = keys.size(2), earlier = L - T;
  auto query_pos = torch::arange(earlier, L, q.options().dtype(torch::kLong)),
       key_pos = torch::arange(L, q.options().dtype(torch::kLong));
  auto lag = query_pos.unsqueeze(1) - key_pos.unsqueeze(0);  // query - key, [T, L]
  auto hidden = lag < 0;
  if (window > 0) hidden = hidden | (lag >= window);
  auto scores = torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  return torch::softmax(scores.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1);
}

torch::Tensor SoftmaxAttention::value_coefficients(const torch::Tensor& x) {
  auto h = project(x, 0);
  return softmax_weights(h.q, repeat_kv(h.k, groups()), window_).unsqueeze(2);  // [B, H, 1, T, T]
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

// The window's cache keeps the last `window` tokens only.
void append_to_window(MixerState& state, const torch::Tensor& k, const torch::Tensor& v, int64_t window) {
  state.k = state.k.defined() ? torch::cat({state.k, k}, 2) : k;  // [B, H_kv, t, hd]
  state.v = state.v.defined() ? torch::cat({state.v, v}, 2) : v;
  if (state.k.size(2) > window) {
    state.k = state.k.narrow(2, state.k.size(2) - window, window).contiguous();
    state.v = state.v.narrow(2, state.v.size(2) - window, window).contiguous();
  }
}

// Static decoding (models/decode_graph.h): k and v written at the device position into caches of a fixed capacity,
// the scores of the rows past it masked, so that nothing changes shape from one token to the next.
torch::Tensor attend_static(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, MixerState& state,
                            double scale) {
  TORCH_CHECK(state.k_buffer.defined() && state.position < state.k_buffer.size(2),
              "static decoding past its caches' capacity of ", state.k_buffer.defined() ? state.k_buffer.size(2) : 0,
              " tokens");
  state.k_buffer.index_copy_(2, state.position_tensor, k);
  state.v_buffer.index_copy_(2, state.position_tensor, v);
  auto scores = torch::matmul(q, state.k_buffer.transpose(-1, -2)) * scale;  // [B, H_kv, g, capacity]
  const auto rows = torch::arange(state.k_buffer.size(2), state.position_tensor.options());
  scores = scores.masked_fill(rows > state.position_tensor, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), state.v_buffer);
}

}  // namespace

torch::Tensor SoftmaxAttention::step(const torch::Tensor& x, MixerState& state) {
  const int64_t B = x.size(0), g = groups();
  auto h = project(x.unsqueeze(1), state.position);  // q [B, H, 1, hd]; k, v [B, H_kv, 1, hd]
  if (state.position_tensor.defined() && window_ == 0) {
    const auto q = h.q.reshape({B, n_kv_heads_, g, head_dim_});
    const auto y = attend_static(q, h.k, h.v, state, 1.0 / std::sqrt(static_cast<double>(head_dim_)));
    return output(y.reshape({B, n_heads_, 1, head_dim_})).squeeze(1);
  }
  if (window_ > 0) {
    append_to_window(state, h.k, h.v, window_);
  } else {
    append_to_cache(state.k_buffer, state.k, h.k);
    append_to_cache(state.v_buffer, state.v, h.v);
  }
  // The g query heads of a group read their key/value head together: the cache is never repeated.
  auto q = h.q.reshape({B, n_kv_heads_, g, head_dim_});
  auto scores =
      torch::matmul(q, state.k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim_));  // [B, H_kv, g, t]
  auto y = torch::matmul(torch::softmax(scores, -1), state.v);                                  // [B, H_kv, g, hd]
  return output(y.reshape({B, n_heads_, 1, head_dim_})).squeeze(1);
}

}  // namespace fwlab
