// Hugging Face GPT-2 (gpt2, gpt2-medium/large/xl, distilgpt2): config.json keys, the tensor table (Conv1D weights
// stored [in, out]) and the config.json an export writes.
#include <fmt/format.h>

#include <regex>

#include "contract/formats/hf/family.h"

namespace fwlab {

using safetensors::FormatError;

// Named, not anonymous: the unity build may compile this file with the other families' (their hooks share names).
namespace gpt2_hf {

// Options of Hugging Face's GPT2 that change the computation and that fwlab does not implement: refused by name
// rather than approximated.
void reject_unimplemented(const nlohmann::json& j, const std::string& where) {
  struct Option {
    const char* key;
    bool implemented_value;
    const char* what;
  };
  static const Option kOptions[] = {
      {"scale_attn_by_inverse_layer_idx", false, "scales attention scores by 1 / (layer index + 1)"},
      {"reorder_and_upcast_attn", false, "reorders and upcasts the attention product"},
      {"add_cross_attention", false, "adds encoder-decoder cross-attention"},
      {"scale_attn_weights", true, "leaving attention scores unscaled by 1 / sqrt(head_dim)"},
      {"tie_word_embeddings", true, "an output projection separate from wte"},
  };
  for (const auto& o : kOptions) {
    if (hf_bool_key(j, o.key, where, o.implemented_value) != o.implemented_value)
      throw FormatError(
          fmt::format("{}: key '{}' = {} is not implemented by fwlab ({}); refusing rather than approximating", where,
                      o.key, j[o.key].dump(), o.what));
  }
}

std::string activation_of(const nlohmann::json& j, const std::string& where) {
  const auto v = j.value("activation_function", nlohmann::json("gelu_new"));
  if (!v.is_string())
    throw FormatError(fmt::format("{}: key 'activation_function' must be a string, got {}", where, v.dump()));
  const auto name = v.get<std::string>();
  // gelu_new, gelu_pytorch_tanh and gelu_fast are the same tanh approximation written three ways.
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return "gelu_tanh";
  if (name == "gelu") return "gelu";
  throw FormatError(
      fmt::format("{}: key 'activation_function' = '{}' is not implemented by fwlab "
                  "(gelu_new, gelu_pytorch_tanh, gelu_fast or gelu)",
                  where, name));
}

ModelConfig config_from_json(const nlohmann::json& j, const std::string& where) {
  reject_unimplemented(j, where);
  ModelConfig c;
  c.vocab = hf_int_key(j, "vocab_size", where);
  c.d_model = hf_int_key(j, "n_embd", where);
  c.n_heads = hf_int_key(j, "n_head", where);
  c.n_layers = hf_int_key(j, "n_layer", where);
  // n_ctx is the name of older files; n_positions is the size of wpe.
  c.context = hf_int_key(j, "n_positions", where, !j.contains("n_ctx"),
                         j.contains("n_ctx") ? hf_int_key(j, "n_ctx", where) : 0);
  if (c.d_model % c.n_heads != 0)
    throw FormatError(fmt::format("{}: n_embd = {} is not a multiple of n_head = {}", where, c.d_model, c.n_heads));
  c.head_dim = c.d_model / c.n_heads;
  c.d_ff = hf_int_key(j, "n_inner", where, false, 0);  // null: 4 * n_embd
  c.activation = activation_of(j, where);
  c.ln_eps = hf_number_key(j, "layer_norm_epsilon", where, 1e-5);
  // One dropout rate in fwlab: the residual one (GPT-2's three are equal); a job's model.dropout overrides it.
  c.dropout = hf_number_key(j, "resid_pdrop", where, 0.1);
  return hf_validated(c, where);
}

std::string cannot_hold(const ModelConfig& c) {
  const ModelConfig gpt2;
  if (c.positions != gpt2.positions || c.block_norm != gpt2.block_norm || c.mlp != gpt2.mlp || !c.tied_head)
    return "needs learned positions, LayerNorm, a plain MLP and a tied head";
  if (c.kv_heads() != c.n_heads || !c.qkv_bias || !c.o_bias || !c.mlp_bias || c.attention_window > 0)
    return "has no grouped-query heads, no sliding window and biases everywhere";
  if (c.activation == "silu") return "has no silu activation";
  if (c.n_heads * c.head_dim != c.d_model)
    return fmt::format("needs n_heads * head_dim = d_model, got {} * {} != {}", c.n_heads, c.head_dim, c.d_model);
  return "";
}

std::vector<HfName> names(const ModelConfig& c) {
  const int64_t d = c.d_model, ff = c.ff_dim();
  std::vector<HfName> out = {{"wte.weight", "wte.weight", {c.vocab, d}}, {"wpe.weight", "wpe.weight", {c.context, d}}};
  auto add = [&](const std::string& hf, const std::string& fwlab, std::vector<int64_t> shape, bool conv1d) {
    out.push_back({hf, fwlab, std::move(shape), conv1d ? HfOp::transpose : HfOp::copy});
  };
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const auto h = fmt::format("h.{}.", i), b = fmt::format("blocks.{}.", i);
    add(h + "ln_1.weight", b + "ln1.weight", {d}, false);
    add(h + "ln_1.bias", b + "ln1.bias", {d}, false);
    add(h + "attn.c_attn.weight", b + "mixer.qkv.weight", {d, 3 * d}, true);
    add(h + "attn.c_attn.bias", b + "mixer.qkv.bias", {3 * d}, false);
    add(h + "attn.c_proj.weight", b + "mixer.o.weight", {d, d}, true);
    add(h + "attn.c_proj.bias", b + "mixer.o.bias", {d}, false);
    add(h + "ln_2.weight", b + "ln2.weight", {d}, false);
    add(h + "ln_2.bias", b + "ln2.bias", {d}, false);
    add(h + "mlp.c_fc.weight", b + "fc.weight", {d, ff}, true);
    add(h + "mlp.c_fc.bias", b + "fc.bias", {ff}, false);
    add(h + "mlp.c_proj.weight", b + "proj.weight", {ff, d}, true);
    add(h + "mlp.c_proj.bias", b + "proj.bias", {d}, false);
  }
  add("ln_f.weight", "ln_f.weight", {d}, false);
  add("ln_f.bias", "ln_f.bias", {d}, false);
  out.push_back({"lm_head.weight", "wte.weight", {c.vocab, d}, HfOp::tied, 0, /*optional=*/true});
  return out;
}

nlohmann::json config_json(const ModelConfig& c) {
  // The keys Hugging Face's GPT2Config writes for the released checkpoints; <|endoftext|> is the last token.
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", c.activation == "gelu" ? "gelu" : "gelu_new"},
          {"vocab_size", c.vocab},
          {"n_positions", c.context},
          {"n_ctx", c.context},
          {"n_embd", c.d_model},
          {"n_head", c.n_heads},
          {"n_layer", c.n_layers},
          {"n_inner", c.d_ff > 0 ? nlohmann::json(c.d_ff) : nlohmann::json(nullptr)},
          {"layer_norm_epsilon", c.ln_eps},
          {"resid_pdrop", c.dropout},
          {"embd_pdrop", c.dropout},
          {"attn_pdrop", c.dropout},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"bos_token_id", c.vocab - 1},
          {"eos_token_id", c.vocab - 1},
          {"use_cache", true}};
}

bool ignored(const std::string& name) {
  static const std::regex kMaskBuffer(R"(h\.[0-9]+\.attn\.(bias|masked_bias))");
  return std::regex_match(name, kMaskBuffer);
}

std::string size_keys(const ModelConfig& c) {
  return fmt::format("n_layer = {}, n_embd = {}, n_positions = {}, vocab_size = {}", c.n_layers, c.d_model, c.context,
                     c.vocab);
}

}  // namespace gpt2_hf

const HfFamily& gpt2_family() {
  static const HfFamily family{"gpt2",
                               {"gpt2"},
                               {"GPT2LMHeadModel"},
                               gpt2_hf::config_from_json,
                               gpt2_hf::cannot_hold,
                               gpt2_hf::names,
                               gpt2_hf::config_json,
                               "transformer.",
                               gpt2_hf::ignored,
                               gpt2_hf::size_keys};
  return family;
}

}  // namespace fwlab
