// Sizes computed from a model configuration alone: parameter counts and the state generation carries (the
// planner prints them before any job runs).
#include <algorithm>

#include "contract/model/feature_map_table.h"
#include "contract/model/mixer_table.h"
#include "contract/model/model_config.h"
#include "contract/model/rule_table.h"

namespace fwlab {

namespace {

int64_t mlp_parameters(const ModelConfig& c) {
  const int64_t d = c.d_model, ff = c.ff_dim();
  if (c.mlp == "none") return 0;
  if (c.mlp == "gated") return 3 * d * ff + (c.mlp_bias ? 2 * ff + d : 0);
  return 2 * d * ff + (c.mlp_bias ? ff + d : 0);
}

int64_t mixer_parameters(const MixerSpec& s, const ModelConfig& c) { return find_mixer(s.kind)->parameters(s, c); }

}  // namespace

bool softmax_only(const ModelConfig& cfg) {
  return std::all_of(cfg.layers.begin(), cfg.layers.end(), [](const MixerSpec& m) { return m.kind == "softmax"; });
}

bool has_attention_projections(const MixerSpec& s) { return find_mixer(s.kind)->attention_projections; }

// q, k, v (grouped-query: n_kv_heads key and value heads) and o, with the biases the block has.
int64_t attention_projection_parameters(const ModelConfig& c) {
  const int64_t d = c.d_model, inner = c.n_heads * c.head_dim, qkv_out = inner + 2 * c.kv_heads() * c.head_dim;
  return d * qkv_out + (c.qkv_bias ? qkv_out : 0) + inner * d + (c.o_bias ? d : 0);
}

int64_t fast_weight_parameters(const MixerSpec& s, const ModelConfig& c) {
  const int64_t H = c.n_heads, hd = c.head_dim;
  const LayerDims dims{c.d_model, H, hd, s.m};
  const int64_t conv = s.conv * (H * hd + 2 * c.kv_heads() * hd);  // one filter per q, k, v channel, no bias
  const int64_t out_norm =
      s.out_norm == "rmsnorm" ? hd : 0;  // one weight over the value dimension, shared by the heads
  return attention_projection_parameters(c) + conv + out_norm + find_feature_map(s.feature_map)->parameters(dims) +
         find_rule(s.rule)->parameters(dims);
}

// A fast-weight layer repeats the key and value heads to every query head first (LoLCATs), so its state and
// sliding window are per query head.
StateSize fast_weight_state(const MixerSpec& s, const ModelConfig& c) {
  const int64_t H = c.n_heads, hd = c.head_dim, kv = c.kv_heads() * hd;
  int64_t fixed = find_rule(s.rule)->state_elements(LayerDims{c.d_model, H, hd, s.m});
  if (s.norm == "attn") fixed += H * s.m;                     // normaliser z
  fixed += 2 * H * hd * s.swa_window;                         // the sliding window's keys and values
  if (s.conv > 0) fixed += (s.conv - 1) * (H * hd + 2 * kv);  // the convolution's last inputs
  return {fixed, 0};
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t d = c.d_model, norm = c.block_norm == "rmsnorm" ? d : 2 * d;
  int64_t n = c.vocab * d + (c.encoder_decoder() ? 0 : norm);  // wte, final norm (post-LN has none)
  if (c.positions == "learned") n += c.context * d;            // wpe
  if (!c.tied_head) n += c.vocab * d;                          // lm_head
  const int64_t r = c.lora_rank, inner = c.n_heads * c.head_dim, kv_inner = c.kv_heads() * c.head_dim;
  for (const auto& layer : c.layers) {
    n += (c.mlp == "none" ? 1 : 2) * norm + mlp_parameters(c) + mixer_parameters(layer, c);  // ln1 (and ln2)
    if (r > 0 && has_attention_projections(layer))
      n += 3 * r * d + r * (inner + 2 * kv_inner) + r * (inner + d);  // q, k, v; o
  }
  return n + encoder_decoder_parameters(c);
}

int64_t encoder_decoder_parameters(const ModelConfig& c) {
  if (!c.encoder_decoder()) return 0;
  const int64_t norm = 2 * c.d_model;
  const int64_t encoder_mixer =
      c.encoder.kind == "softmax" ? attention_projection_parameters(c) : mixer_parameters(c.encoder, c);
  const int64_t encoder_layer = encoder_mixer + mlp_parameters(c) + 2 * norm;
  const int64_t cross = mixer_parameters(c.cross, c) + norm;  // with its own LayerNorm in every decoder layer
  return c.encoder_layers * encoder_layer + c.n_layers * cross;
}

StateSize cross_state_size(const ModelConfig& c) {
  if (!c.encoder_decoder() || c.cross.kind != "fast_weight") return {};
  return {c.n_layers * c.n_heads * c.cross.m * (c.head_dim + 1), 0};  // S [m, hd] and z [m] per head and layer
}

StateSize mixer_state_size(const MixerSpec& s, const ModelConfig& c) { return find_mixer(s.kind)->state(s, c); }

StateSize state_size(const ModelConfig& c) {
  StateSize total = cross_state_size(c);
  for (const auto& layer : c.layers) {
    auto s = mixer_state_size(layer, c);
    total.fixed += s.fixed;
    total.per_token += s.per_token;
  }
  return total;
}

}  // namespace fwlab
