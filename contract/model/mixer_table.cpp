#include "contract/model/mixer_table.h"

#include "contract/model/named_rows.h"

namespace fwlab {

namespace {

int64_t attention_parameters(const MixerSpec&, const ModelConfig& c) { return attention_projection_parameters(c); }

// Softmax caches the keys and values of the n_kv_heads shared heads, of every token (or of the last
// attention_window); local attention of its window.
StateSize softmax_state(const MixerSpec&, const ModelConfig& c) {
  const int64_t kv = c.kv_heads() * c.head_dim;
  return c.attention_window > 0 ? StateSize{2 * kv * c.attention_window, 0} : StateSize{0, 2 * kv};
}
StateSize local_state(const MixerSpec& s, const ModelConfig& c) {
  return {2 * c.kv_heads() * c.head_dim * s.window, 0};
}

// SRU: W (3d x d, no bias), v_f, v_r, b_f, b_r; its cell c: d_model.
int64_t sru_parameters(const MixerSpec&, const ModelConfig& c) { return 3 * c.d_model * c.d_model + 4 * c.d_model; }
StateSize sru_state(const MixerSpec&, const ModelConfig& c) { return {c.d_model, 0}; }

// SRU++: W1 (d -> d'), W3 (d' -> 3d) and the cell; with attention W2 (d' -> 2d'), alpha and a LayerNorm, and a KV
// cache of 2 d' per token.
int64_t srupp_attn_dim(const MixerSpec& s, const ModelConfig& c) { return s.attn_dim > 0 ? s.attn_dim : c.d_model / 4; }
int64_t srupp_parameters(const MixerSpec& s, const ModelConfig& c) {
  const int64_t d = c.d_model, da = srupp_attn_dim(s, c);
  int64_t n = d * da + da * 3 * d + 4 * d;
  if (s.attention) n += da * 2 * da + 1 + 2 * da;
  return n;
}
StateSize srupp_state(const MixerSpec& s, const ModelConfig& c) {
  return {c.d_model, s.attention ? 2 * srupp_attn_dim(s, c) : 0};
}

// Zoology's BaseConv: the projection and the convolution, each with a bias; its last conv - 1 inputs.
int64_t base_conv_parameters(const MixerSpec& s, const ModelConfig& c) {
  return c.d_model * c.d_model + c.d_model + s.conv * c.d_model + c.d_model;
}
StateSize base_conv_state(const MixerSpec& s, const ModelConfig& c) { return {(s.conv - 1) * c.d_model, 0}; }

}  // namespace

// Function-local statics only: tests register one case per row at static-initialisation time.
const std::vector<MixerRow>& mixer_table() {
  static const std::vector<MixerRow> rows = {
      {"softmax", "Vaswani et al. 2017", true, false, false, attention_parameters, softmax_state},
      {"local", "sliding-window attention", true, false, false, attention_parameters, local_state},
      {"fast_weight", "Schlag et al. 2021; Mao 2022", true, true, false, fast_weight_parameters, fast_weight_state},
      {"sru", "Lei et al. 2018", false, true, true, sru_parameters, sru_state},
      {"srupp", "Lei 2021 (SRU++)", false, true, true, srupp_parameters, srupp_state},
      {"base_conv", "Arora et al. 2023 (Zoology)", false, true, true, base_conv_parameters, base_conv_state},
  };
  return rows;
}

const MixerRow* find_mixer(const std::string& kind) { return find_named_row(mixer_table(), kind); }

std::vector<std::string> mixer_names() { return row_names(mixer_table()); }

}  // namespace fwlab
