// Hugging Face's Llama family: LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM (Llama 2/3.x, Mistral,
// Qwen2/2.5, SmolLM). One block for all three: RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention;
// they differ in biases (Llama: attention_bias / mlp_bias; Qwen2: q, k, v always, o never; Mistral: none) and in
// Mistral's sliding window. Weights are stored [out, in] as fwlab's; q/k/v_proj fill the rows of the fused qkv and
// gate/up_proj those of the gated MLP's fc.
#include <fmt/format.h>

#include <map>

#include "contract/formats/hf/family.h"

namespace fwlab {

using safetensors::FormatError;

// Named, not anonymous: the unity build may compile this file with the other families' (their hooks share names).
namespace llama_hf {

std::string string_key(const nlohmann::json& j, const char* key, const std::string& where,
                       const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string())
    throw FormatError(fmt::format("{}: key '{}' must be a string, got {}", where, key, j[key].dump()));
  return j[key].get<std::string>();
}

// rope_scaling: null, or {"rope_type" (older files: "type"): default | linear | llama3, "factor", ...}.
RopeSpec rope_of(const nlohmann::json& j, const std::string& where) {
  RopeSpec r;
  r.theta = hf_number_key(j, "rope_theta", where, 10000.0);
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return r;
  const auto& s = j["rope_scaling"];
  const auto at = where + ": rope_scaling";
  if (!s.is_object())
    throw FormatError(fmt::format("{}: key 'rope_scaling' must be an object or null, got {}", where, s.dump()));
  const auto type = string_key(s, "rope_type", at, string_key(s, "type", at, "default"));
  if (type == "default") return r;
  if (type != "linear" && type != "llama3")
    throw FormatError(fmt::format(
        "{}: key 'rope_scaling' has type '{}', which fwlab does not implement (default, linear, llama3)", where, type));
  r.scaling = type;
  r.factor = hf_number_key(s, "factor", at, 0.0);
  if (!(r.factor > 0.0))
    throw FormatError(fmt::format("{}: key 'rope_scaling.factor' must be a positive number", where));
  if (type == "llama3") {
    r.low_freq_factor = hf_number_key(s, "low_freq_factor", at, 1.0);
    r.high_freq_factor = hf_number_key(s, "high_freq_factor", at, 4.0);
    r.original_context = hf_int_key(s, "original_max_position_embeddings", at);
  }
  return r;
}

// Biases and windows by architecture (Hugging Face's LlamaAttention / Qwen2Attention / MistralAttention).
void set_variant(ModelConfig& c, const nlohmann::json& j, const std::string& type, const std::string& where) {
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
  if (type == "llama") {
    c.qkv_bias = c.o_bias = hf_bool_key(j, "attention_bias", where, false);
    c.mlp_bias = hf_bool_key(j, "mlp_bias", where, false);
  } else if (type == "qwen2") {
    c.qkv_bias = true;
    // Qwen2 files carry a sliding_window that only use_sliding_window turns on, from max_window_layers up.
    if (hf_bool_key(j, "use_sliding_window", where, false))
      throw FormatError(
          fmt::format("{}: key 'use_sliding_window' = true (a window from layer max_window_layers up) is not "
                      "implemented by fwlab; refusing rather than approximating",
                      where));
  } else if (type == "mistral") {
    const int64_t window = hf_int_key(j, "sliding_window", where, false, 0);
    c.attention_window = window < c.context ? window : 0;  // a window as long as the context changes nothing
  }
}

ModelConfig config_from_json(const nlohmann::json& j, const std::string& where) {
  const auto type = j["model_type"].get<std::string>();
  ModelConfig c;
  c.block_norm = "rmsnorm", c.positions = "rope", c.mlp = "gated", c.tied_head = false, c.dropout = 0.0;
  c.vocab = hf_int_key(j, "vocab_size", where);
  c.d_model = hf_int_key(j, "hidden_size", where);
  c.d_ff = hf_int_key(j, "intermediate_size", where);
  c.n_layers = hf_int_key(j, "num_hidden_layers", where);
  c.n_heads = hf_int_key(j, "num_attention_heads", where);
  c.n_kv_heads = hf_int_key(j, "num_key_value_heads", where, false, c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    throw FormatError(fmt::format("{}: key 'num_attention_heads' = {} is not a multiple of 'num_key_value_heads' = {}",
                                  where, c.n_heads, c.n_kv_heads));
  if (!j.contains("head_dim") && c.d_model % c.n_heads != 0)
    throw FormatError(
        fmt::format("{}: hidden_size = {} is not a multiple of num_attention_heads = {} (and no head_dim)", where,
                    c.d_model, c.n_heads));
  c.head_dim = hf_int_key(j, "head_dim", where, false, c.d_model / c.n_heads);
  c.context = hf_int_key(j, "max_position_embeddings", where);
  c.ln_eps = hf_number_key(j, "rms_norm_eps", where, 1e-6);
  const auto act = string_key(j, "hidden_act", where, "silu");
  if (act != "silu")
    throw FormatError(
        fmt::format("{}: key 'hidden_act' = '{}' is not implemented by fwlab for {} (silu)", where, act, type));
  c.activation = "silu";
  c.tied_head = hf_bool_key(j, "tie_word_embeddings", where, false);
  c.dropout = hf_number_key(j, "attention_dropout", where, 0.0);
  c.rope = rope_of(j, where);
  set_variant(c, j, type, where);
  return hf_validated(c, where);
}

std::string model_type_of(const ModelConfig& c) {
  if (c.qkv_bias && !c.o_bias) return "qwen2";
  if (c.attention_window > 0) return "mistral";
  return "llama";
}

std::string cannot_hold(const ModelConfig& c) {
  if (!c.rope_positions() || c.block_norm != "rmsnorm" || c.mlp != "gated" || c.activation != "silu")
    return "needs rotary positions, RMSNorm and a gated MLP with silu";
  const auto type = model_type_of(c);
  if (type == "qwen2" && (c.mlp_bias || c.attention_window > 0)) return "Qwen2 has q, k, v biases only and no window";
  if (type == "mistral" && (c.qkv_bias || c.o_bias || c.mlp_bias || c.rope.scaling != "none"))
    return "Mistral (a sliding window) has no biases and no rope scaling";
  if (type == "llama" && c.qkv_bias != c.o_bias)
    return "Llama's attention_bias puts a bias on all of q, k, v, o or none";
  return "";
}

std::vector<HfName> names(const ModelConfig& c) {
  const int64_t d = c.d_model, ff = c.ff_dim(), inner = c.n_heads * c.head_dim, kv = c.kv_heads() * c.head_dim;
  std::vector<HfName> out = {{"model.embed_tokens.weight", "wte.weight", {c.vocab, d}}};
  auto rows = [&](const std::string& hf, const std::string& fwlab, std::vector<int64_t> shape, int64_t offset) {
    out.push_back({hf, fwlab, std::move(shape), HfOp::rows, offset});
  };
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const auto h = fmt::format("model.layers.{}.", i), b = fmt::format("blocks.{}.", i);
    out.push_back({h + "input_layernorm.weight", b + "ln1.weight", {d}});
    const int64_t offsets[] = {0, inner, inner + kv}, sizes[] = {inner, kv, kv};
    const char* projections[] = {"q_proj", "k_proj", "v_proj"};
    for (int p = 0; p < 3; ++p) {
      rows(fmt::format("{}self_attn.{}.weight", h, projections[p]), b + "mixer.qkv.weight", {sizes[p], d}, offsets[p]);
      if (c.qkv_bias)
        rows(fmt::format("{}self_attn.{}.bias", h, projections[p]), b + "mixer.qkv.bias", {sizes[p]}, offsets[p]);
    }
    out.push_back({h + "self_attn.o_proj.weight", b + "mixer.o.weight", {d, inner}});
    if (c.o_bias) out.push_back({h + "self_attn.o_proj.bias", b + "mixer.o.bias", {d}});
    out.push_back({h + "post_attention_layernorm.weight", b + "ln2.weight", {d}});
    rows(h + "mlp.gate_proj.weight", b + "fc.weight", {ff, d}, 0);
    rows(h + "mlp.up_proj.weight", b + "fc.weight", {ff, d}, ff);
    out.push_back({h + "mlp.down_proj.weight", b + "proj.weight", {d, ff}});
    if (c.mlp_bias) {
      rows(h + "mlp.gate_proj.bias", b + "fc.bias", {ff}, 0);
      rows(h + "mlp.up_proj.bias", b + "fc.bias", {ff}, ff);
      out.push_back({h + "mlp.down_proj.bias", b + "proj.bias", {d}});
    }
  }
  out.push_back({"model.norm.weight", "ln_f.weight", {d}});
  if (c.tied_head)
    out.push_back({"lm_head.weight", "wte.weight", {c.vocab, d}, HfOp::tied, 0, /*optional=*/true});
  else
    out.push_back({"lm_head.weight", "lm_head.weight", {c.vocab, d}});
  return out;
}

nlohmann::json rope_scaling_json(const RopeSpec& r) {
  if (r.scaling == "none") return nullptr;
  nlohmann::json s = {{"rope_type", r.scaling}, {"factor", r.factor}};
  if (r.scaling == "llama3")
    s.update({{"low_freq_factor", r.low_freq_factor},
              {"high_freq_factor", r.high_freq_factor},
              {"original_max_position_embeddings", r.original_context}});
  return s;
}

nlohmann::json config_json(const ModelConfig& c) {
  static const std::map<std::string, std::string> kArchitectures = {
      {"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}};
  const auto type = model_type_of(c);
  nlohmann::json j = {{"architectures", {kArchitectures.at(type)}},
                      {"model_type", type},
                      {"vocab_size", c.vocab},
                      {"hidden_size", c.d_model},
                      {"intermediate_size", c.ff_dim()},
                      {"num_hidden_layers", c.n_layers},
                      {"num_attention_heads", c.n_heads},
                      {"num_key_value_heads", c.kv_heads()},
                      {"head_dim", c.head_dim},
                      {"max_position_embeddings", c.context},
                      {"rms_norm_eps", c.ln_eps},
                      {"hidden_act", "silu"},
                      {"rope_theta", c.rope.theta},
                      {"tie_word_embeddings", c.tied_head},
                      {"attention_dropout", c.dropout},
                      {"initializer_range", 0.02},
                      {"use_cache", true}};
  if (type != "mistral") j["rope_scaling"] = rope_scaling_json(c.rope);
  if (type == "llama") j["attention_bias"] = c.qkv_bias, j["mlp_bias"] = c.mlp_bias;
  if (type == "mistral") j["sliding_window"] = c.attention_window;
  if (type == "qwen2") j["use_sliding_window"] = false;
  return j;
}

bool ignored(const std::string&) { return false; }

std::string size_keys(const ModelConfig& c) {
  return fmt::format(
      "num_hidden_layers = {}, hidden_size = {}, num_attention_heads = {}, num_key_value_heads = {}, head_dim = {}, "
      "intermediate_size = {}, vocab_size = {}",
      c.n_layers, c.d_model, c.n_heads, c.kv_heads(), c.head_dim, c.ff_dim(), c.vocab);
}

}  // namespace llama_hf

const HfFamily& llama_family() {
  static const HfFamily family{"llama",
                               {"llama", "mistral", "qwen2"},
                               {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"},
                               llama_hf::config_from_json,
                               llama_hf::cannot_hold,
                               llama_hf::names,
                               llama_hf::config_json,
                               "",
                               llama_hf::ignored,
                               llama_hf::size_keys};
  return family;
}

}  // namespace fwlab
