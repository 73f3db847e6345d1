// The projections softmax and fast-weight layers share (models/mixers.h, AttentionMixer).
#include <cmath>

#include "models/mixers.h"

namespace fwlab {

namespace {
thread_local bool skip_initialisation = false;
}  // namespace

SkipInitialisation::SkipInitialisation() : previous_(skip_initialisation) { skip_initialisation = true; }
SkipInitialisation::~SkipInitialisation() { skip_initialisation = previous_; }
bool SkipInitialisation::active() { return skip_initialisation; }

void init_gpt2_linear(torch::nn::Linear& layer, double std) {
  if (skip_initialisation) return;
  torch::NoGradGuard guard;
  layer->weight.normal_(0.0, std);
  if (layer->bias.defined()) layer->bias.zero_();
}

torch::nn::Linear linear_layer(const torch::nn::LinearOptions& options) {
  if (!skip_initialisation) return torch::nn::Linear(options);
  torch::nn::Linear layer(torch::nn::LinearOptions(1, 1).bias(options.bias()));  // one drawn value, then replaced
  layer->options = options;
  layer->weight.set_data(torch::empty({options.out_features(), options.in_features()}));
  if (options.bias()) layer->bias.set_data(torch::empty({options.out_features()}));
  return layer;
}

torch::nn::Embedding embedding_layer(int64_t count, int64_t dim) {
  if (!skip_initialisation) return torch::nn::Embedding(count, dim);
  torch::nn::Embedding layer(1, 1);
  layer->options = torch::nn::EmbeddingOptions(count, dim);
  layer->weight.set_data(torch::empty({count, dim}));
  return layer;
}

torch::Tensor repeat_kv(const torch::Tensor& x, int64_t groups) {
  if (groups == 1) return x;
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), hd = x.size(3);
  return x.unsqueeze(2).expand({B, H, groups, T, hd}).reshape({B, H * groups, T, hd});
}

AttentionMixer::AttentionMixer(const ModelConfig& cfg)
    : n_heads_(cfg.n_heads), n_kv_heads_(cfg.kv_heads()), head_dim_(cfg.head_dim) {
  const int64_t inner = n_heads_ * head_dim_, kv_inner = n_kv_heads_ * head_dim_;
  qkv = register_module("qkv",
                        linear_layer(torch::nn::LinearOptions(cfg.d_model, inner + 2 * kv_inner).bias(cfg.qkv_bias)));
  o = register_module("o", linear_layer(torch::nn::LinearOptions(inner, cfg.d_model).bias(cfg.o_bias)));
  init_gpt2_linear(qkv);
  init_gpt2_linear(o, 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers)));  // GPT-2's residual scaling
  if (cfg.rope_positions()) rope_.emplace(cfg.rope, head_dim_);
}

void AttentionMixer::add_lora(const ModelConfig& cfg) {
  if (cfg.lora_rank <= 0) return;
  const int64_t d = cfg.d_model, inner = n_heads_ * head_dim_, kv_inner = n_kv_heads_ * head_dim_, r = cfg.lora_rank;
  qkv_lora = register_module("qkv_lora", LoraAdapter(std::vector<int64_t>{inner, kv_inner, kv_inner}, d, r,
                                                     cfg.lora_scale()));  // q, k, v apart
  o_lora = register_module("o_lora", LoraAdapter(std::vector<int64_t>{d}, inner, r, cfg.lora_scale()));
}

void AttentionMixer::add_short_conv(int64_t taps) {
  conv = register_module("conv", ShortConv(n_heads_ * head_dim_ + 2 * n_kv_heads_ * head_dim_, taps));
}

QkvHeads AttentionMixer::project(const torch::Tensor& x, int64_t position, torch::Tensor* conv_cache,
                                 const torch::Tensor& product) {
  const int64_t B = x.size(0), T = x.size(1), inner = n_heads_ * head_dim_, kv_inner = n_kv_heads_ * head_dim_;
  auto all = !product.defined() ? with_lora(qkv, qkv_lora, x) : qkv_lora ? product + qkv_lora->forward(x) : product;
  if (conv) all = conv(all, conv_cache);
  // One split, whose backward is one concatenation (three narrows' are three zero-filled copies of `all` summed).
  const auto parts = all.split_with_sizes({inner, kv_inner, kv_inner}, -1);
  auto heads = [&](size_t i, int64_t n) { return parts[i].view({B, T, n, head_dim_}).transpose(1, 2); };
  QkvHeads h{heads(0, n_heads_), heads(1, n_kv_heads_), heads(2, n_kv_heads_)};
  if (rope_) h.q = rope_->apply(h.q, position), h.k = rope_->apply(h.k, position);
  return h;
}

torch::Tensor AttentionMixer::output(const torch::Tensor& y) {
  const int64_t B = y.size(0), T = y.size(2);
  return with_lora(o, o_lora, y.transpose(1, 2).reshape({B, T, n_heads_ * head_dim_}));
}

}  // namespace fwlab
