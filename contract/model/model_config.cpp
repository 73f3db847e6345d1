#include "contract/model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "contract/job/did_you_mean.h"
#include "contract/model/feature_map_table.h"
#include "contract/model/mixer_table.h"
#include "contract/model/rule_table.h"

namespace fwlab {

ConfigError::ConfigError(std::string field, const std::string& message)
    : std::runtime_error(field.empty() ? message : field + ": " + message),
      field_(std::move(field)),
      message_(message) {}

void require_one_of(const std::string& value, const std::vector<std::string>& allowed, const std::string& field) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
    throw ConfigError(
        field, fmt::format("'{}' is not one of {}{}", value, fmt::join(allowed, ", "), did_you_mean(value, allowed)));
}

namespace {

const std::vector<std::string> kOutNorms = {"none", "rmsnorm"};
const std::vector<std::string> kNorms = {"attn", "none"};

void require_positive(int64_t value, const std::string& field) {
  if (value <= 0) throw ConfigError(field, fmt::format("must be positive, got {}", value));
}

// Sizes far beyond any model fwlab can hold are mistakes (a typo'd exponent); they are refused here so that no
// product of them overflows and no job starts allocating them.
void require_at_most(int64_t value, int64_t limit, const std::string& field) {
  if (value > limit)
    throw ConfigError(field, fmt::format("{} is beyond what fwlab supports (at most {})", value, limit));
}

constexpr int64_t kMaxParameters = int64_t{1} << 40;
constexpr int64_t kMaxLayers = int64_t{1} << 12;
// A short convolution is a token shift of a few taps (4 in DeltaNet); more is a typo, not a design.
constexpr int64_t kMaxConvTaps = 64;

}  // namespace

bool MixerSpec::is_recurrent() const {
  const auto* row = find_mixer(kind);
  return row && row->recurrent;
}

std::string MixerSpec::describe() const {
  if (kind == "fast_weight") {
    const auto* map_row = find_feature_map(feature_map);
    std::string map = map_row && map_row->uses_nu ? fmt::format("{}{}", feature_map, dpfp_nu) : feature_map;
    std::string keys = key_norm.empty() ? "" : "+" + key_norm + "keys";
    std::string extras = swa_window > 0 ? fmt::format("+swa{}", swa_window) : "";
    if (conv > 0) extras += fmt::format("+conv{}", conv);
    if (beta_init > 0) extras += fmt::format("+beta{}", beta_init);
    if (gate_init > 0) extras += fmt::format("+gate{}", gate_init);
    if (out_norm != "none") extras += "+out_" + out_norm;
    return fmt::format("{}{}/{}/{}/m={}{}", rule, keys, map, norm, m, extras);
  }
  if (kind == "local") return fmt::format("local/w={}", window);
  if (kind == "base_conv") return fmt::format("base_conv/k={}", conv);
  if (kind == "srupp") return attention ? "srupp+attn" : "srupp";
  return kind;
}

namespace {

// The layers a plan lists by index (keep_softmax_layers, base_conv_layers): each exists, once, in one list only.
void check_listed_layers(const std::vector<int64_t>& layers, const char* key, int64_t n_layers,
                         std::set<int64_t>& seen) {
  for (const auto layer : layers) {
    if (layer < 0 || layer >= n_layers)
      throw ConfigError(key,
                        fmt::format("layer {} does not exist (the model has layers 0 to {})", layer, n_layers - 1));
    if (!seen.insert(layer).second) throw ConfigError(key, fmt::format("layer {} is listed twice", layer));
  }
}

void check_kept_layers(const LayerPlan& plan, int64_t n_layers) {
  if (!plan.keep_softmax_layers.empty() && plan.keep_softmax_every > 0)
    throw ConfigError("keep_softmax_layers", "give keep_softmax_every or keep_softmax_layers, not both");
  if (!plan.base_conv_layers.empty() && plan.keep_softmax_every > 0)
    throw ConfigError(
        "base_conv_layers",
        "with keep_softmax_every some layers would be both: list the softmax layers in keep_softmax_layers");
  std::set<int64_t> seen;
  check_listed_layers(plan.keep_softmax_layers, "keep_softmax_layers", n_layers, seen);
  check_listed_layers(plan.base_conv_layers, "base_conv_layers", n_layers, seen);
}

}  // namespace

MixerSpec base_conv_mixer() {
  MixerSpec s;
  s.kind = "base_conv";
  s.conv = 3;  // kernel_size of Zoology's MQAR configurations (zoology/experiments/*/configs.py)
  return s;
}

void apply_plan(ModelConfig& cfg, const LayerPlan& plan) {
  if (plan.keep_softmax_every < 0) throw ConfigError("keep_softmax_every", "must be >= 0");
  if (plan.attention_every < 0) throw ConfigError("attention_every", "must be >= 0");
  check_kept_layers(plan, cfg.n_layers);
  cfg.layers.assign(static_cast<size_t>(std::max<int64_t>(cfg.n_layers, 0)), plan.mixer);
  for (const auto layer : plan.keep_softmax_layers) cfg.layers[static_cast<size_t>(layer)] = MixerSpec{};
  for (const auto layer : plan.base_conv_layers) cfg.layers[static_cast<size_t>(layer)] = base_conv_mixer();
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    auto& layer = cfg.layers[static_cast<size_t>(i)];
    if (layer.kind == "srupp") layer.attention = plan.attention_every > 0 && (i + 1) % plan.attention_every == 0;
    // Counted from the top: the top layer is the 1st, so the n-th, 2n-th, ... from the top stay softmax.
    if (plan.keep_softmax_every > 0 && (cfg.n_layers - i) % plan.keep_softmax_every == 0) layer = MixerSpec{};
  }
}

namespace {

struct InitialValueKey {
  const char* key;   // beta_init
  const char* what;  // "write strength"
  const char* has;   // "has a bias"
  const char* sym;   // "β"
};

// An initial value σ(b) of a bias that only some rules have (0: the rule's own initialisation).
void check_initial_value(double value, const RuleRow& rule, bool RuleRow::*has_bias, const InitialValueKey& k,
                         const std::string& p) {
  if (value == 0.0) return;
  if (!(rule.*has_bias))
    throw ConfigError(p + k.key, fmt::format("only the {} of rule '{}' {} to initialise; rule '{}' has none", k.what,
                                             fmt::join(rules_with(has_bias), "' or '"), k.has, rule.name));
  if (!(value > 0.0 && value < 1.0))
    throw ConfigError(p + k.key,
                      fmt::format("must lie strictly between 0 and 1 (it is σ(b_{})), got {}", k.sym, value));
}

// A fast-weight layer against the rows of its rule and its feature map (contract/model/rule_table.h,
// contract/model/feature_map_table.h).
void validate_fast_weight(const MixerSpec& s, const ModelConfig& cfg, const std::string& p) {
  require_one_of(s.rule, rule_names(), p + "rule");
  require_one_of(s.feature_map, feature_map_names(), p + "feature_map");
  require_one_of(s.norm, kNorms, p + "norm");
  require_positive(s.m, p + "m");
  require_at_most(s.m, int64_t{1} << 16, p + "m");
  require_at_most(s.chunk, int64_t{1} << 16, p + "chunk");
  const auto& rule = *find_rule(s.rule);
  if (std::find(rule.norms.begin(), rule.norms.end(), s.norm) == rule.norms.end())
    throw ConfigError(
        p + "norm", fmt::format("'{}' normalization is not defined for rule '{}'{}; use '{}'", s.norm, s.rule,
                                rule.in_mao_2022 ? " (Mao 2022, Table 1: N/A)" : "", fmt::join(rule.norms, "' or '")));
  if (!rule.feature_maps.empty()) require_one_of(s.feature_map, rule.feature_maps, p + "feature_map");
  if (!s.key_norm.empty()) {
    if (rule.key_norms.empty())
      throw ConfigError(p + "key_norm",
                        fmt::format("rule '{}' normalises no keys: key_norm would change nothing", s.rule));
    require_one_of(s.key_norm, rule.key_norms, p + "key_norm");
  }
  if (s.chunk < 0) throw ConfigError(p + "chunk", fmt::format("must be >= 0 (0: chosen per rule), got {}", s.chunk));
  if (s.chunk > 0 && rule.default_chunk == 0)
    throw ConfigError(
        p + "chunk",
        fmt::format("rule '{}' picks its form and chunk size by measurement: chunk would change nothing", s.rule));
  check_initial_value(s.beta_init, rule, &RuleRow::beta_bias, {"beta_init", "write strength", "has a bias", "β"}, p);
  check_initial_value(s.gate_init, rule, &RuleRow::ugi_gates, {"gate_init", "gates", "have biases", "g"}, p);
  const auto& map = *find_feature_map(s.feature_map);
  if (map.check_size) map.check_size(s, LayerDims{cfg.d_model, cfg.n_heads, cfg.head_dim, s.m}, p);
}

}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> mixer_name_keys() {
  return {{"kind", mixer_names()},
          {"rule", rule_names()},
          {"feature_map", feature_map_names()},
          {"norm", kNorms},
          {"out_norm", kOutNorms}};
}

void validate_mixer(const MixerSpec& s, const ModelConfig& cfg, const std::string& p) {
  require_one_of(s.kind, mixer_names(), p + "kind");
  if (s.kind == "local") require_positive(s.window, p + "window");
  if (s.swa_window < 0)
    throw ConfigError(p + "swa_window", fmt::format("must be >= 0 (0: none), got {}", s.swa_window));
  if (s.swa_window > 0 && s.kind != "fast_weight")
    throw ConfigError(p + "swa_window",
                      fmt::format("only fast_weight layers mix in a sliding window, not '{}'", s.kind));
  if (s.swa_window > cfg.context)
    throw ConfigError(p + "swa_window",
                      fmt::format("{} is larger than the model's context of {}", s.swa_window, cfg.context));
  if (s.conv < 0 || s.conv == 1 || s.conv > kMaxConvTaps)
    throw ConfigError(p + "conv", fmt::format("must be 0 (none) or 2 to {} taps, got {}", kMaxConvTaps, s.conv));
  if (s.conv > 0 && s.kind != "fast_weight" && s.kind != "base_conv")
    throw ConfigError(p + "conv",
                      fmt::format("only fast_weight and base_conv layers have a short convolution, not '{}'", s.kind));
  if (s.kind == "base_conv" && s.conv == 0)
    throw ConfigError(p + "conv", "a base_conv layer is its convolution: give its taps (Zoology: 3)");
  require_one_of(s.out_norm, kOutNorms, p + "out_norm");
  if (s.out_norm != "none" && s.kind != "fast_weight")
    throw ConfigError(p + "out_norm",
                      fmt::format("only a fast_weight layer normalises its heads' outputs, not '{}'", s.kind));
  if (s.gate_init != 0.0 && s.kind != "fast_weight")
    throw ConfigError(p + "gate_init",
                      fmt::format("only a fast_weight layer's gated and decay rules have gates, not '{}'", s.kind));
  if (s.beta_init != 0.0 && s.kind != "fast_weight")
    throw ConfigError(p + "beta_init",
                      fmt::format("only a fast_weight layer's delta rule has a write strength, not '{}'", s.kind));
  require_at_most(s.window, int64_t{1} << 24, p + "window");
  require_at_most(s.attn_dim, int64_t{1} << 16, p + "attn_dim");
  if (s.kind == "srupp") {
    int64_t d_attn = s.attn_dim > 0 ? s.attn_dim : cfg.d_model / 4;
    if (s.attn_dim < 0 || d_attn <= 0) throw ConfigError(p + "attn_dim", "must be positive (or 0 for d_model/4)");
  }
  if (s.kind == "fast_weight") validate_fast_weight(s, cfg, p);
}

void validate(const ModelConfig& cfg) {
  require_positive(cfg.vocab, "vocab");
  require_positive(cfg.d_model, "d_model");
  require_positive(cfg.n_layers, "n_layers");
  require_positive(cfg.n_heads, "n_heads");
  require_positive(cfg.head_dim, "head_dim");
  require_positive(cfg.context, "context");
  if (cfg.d_ff < 0) throw ConfigError("d_ff", "must be >= 0 (0: 4 * d_model)");
  require_at_most(cfg.vocab, int64_t{1} << 24, "vocab");
  require_at_most(cfg.d_model, int64_t{1} << 16, "d_model");
  require_at_most(cfg.n_layers, kMaxLayers, "n_layers");
  require_at_most(cfg.n_heads, int64_t{1} << 12, "n_heads");
  require_at_most(cfg.head_dim, int64_t{1} << 14, "head_dim");
  require_at_most(cfg.n_heads * cfg.head_dim, int64_t{1} << 18, "head_dim");
  require_at_most(cfg.context, int64_t{1} << 24, "context");
  require_at_most(cfg.d_ff, int64_t{1} << 20, "d_ff");
  if (!(cfg.dropout >= 0.0 && cfg.dropout < 1.0))
    throw ConfigError("dropout", fmt::format("must be in [0, 1), got {}", cfg.dropout));
  require_one_of(cfg.activation, {"gelu_tanh", "gelu", "silu", "relu"}, "activation");
  validate_block(cfg);
  validate_encoder_decoder(cfg);
  if (!(cfg.ln_eps > 0.0 && cfg.ln_eps < 1.0))
    throw ConfigError("ln_eps", fmt::format("must be in (0, 1), got {}", cfg.ln_eps));
  if (cfg.lora_rank < 0)
    throw ConfigError("lora_rank", fmt::format("must be >= 0 (0: no LoRA), got {}", cfg.lora_rank));
  require_at_most(cfg.lora_rank, cfg.d_model, "lora_rank");
  if (!(cfg.lora_alpha >= 0.0 && cfg.lora_alpha <= 1e6))
    throw ConfigError("lora_alpha", fmt::format("must be >= 0 (0: the rank), got {}", cfg.lora_alpha));
  if (static_cast<int64_t>(cfg.layers.size()) != cfg.n_layers)
    throw ConfigError("layers", fmt::format("has {} entries but n_layers = {}", cfg.layers.size(), cfg.n_layers));
  for (size_t i = 0; i < cfg.layers.size(); ++i) validate_mixer(cfg.layers[i], cfg, fmt::format("layers[{}].", i));
  if (const auto n = count_parameters(cfg); n > kMaxParameters)
    throw ConfigError(
        "d_model",
        fmt::format("the model would hold {} parameters, beyond what fwlab supports (at most {})", n, kMaxParameters));
}

namespace {

// A rotary setting that the model's positions or scaling would ignore is refused rather than silently dropped.
void validate_rope(const ModelConfig& cfg) {
  const RopeSpec defaults;
  const auto& r = cfg.rope;
  if (!cfg.rope_positions()) {
    if (!(r == defaults)) throw ConfigError("positions", "rope_* settings change nothing unless positions = \"rope\"");
    return;
  }
  if (cfg.head_dim % 2 != 0)
    throw ConfigError("head_dim", fmt::format("rotary positions rotate pairs of channels: {} is odd", cfg.head_dim));
  if (!(r.theta > 1.0 && r.theta < 1e12))
    throw ConfigError("rope_theta", fmt::format("must be in (1, 1e12), got {}", r.theta));
  require_one_of(r.scaling, {"none", "linear", "llama3"}, "rope_scaling");
  if (r.scaling == "none" && r.factor != defaults.factor)
    throw ConfigError("rope_factor", "changes nothing with rope_scaling = \"none\"");
  if (!(r.factor > 0.0 && r.factor < 1e6))
    throw ConfigError("rope_factor", fmt::format("must be in (0, 1e6), got {}", r.factor));
  const bool llama3_keys = r.low_freq_factor != defaults.low_freq_factor ||
                           r.high_freq_factor != defaults.high_freq_factor ||
                           r.original_context != defaults.original_context;
  if (r.scaling != "llama3" && llama3_keys)
    throw ConfigError(
        "rope_scaling",
        "rope_low_freq_factor, rope_high_freq_factor and rope_original_context change nothing unless it is \"llama3\"");
  if (!(r.low_freq_factor > 0.0 && r.low_freq_factor < r.high_freq_factor))
    throw ConfigError("rope_high_freq_factor", fmt::format("must exceed rope_low_freq_factor ({} <= {})",
                                                           r.high_freq_factor, r.low_freq_factor));
  require_positive(r.original_context, "rope_original_context");
}

}  // namespace

void validate_block(const ModelConfig& cfg) {
  require_one_of(cfg.block_norm, {"layernorm", "rmsnorm"}, "block_norm");
  require_one_of(cfg.positions, {"learned", "rope", "sinusoidal", "none"}, "positions");
  require_one_of(cfg.mlp, {"plain", "gated", "none"}, "mlp");
  if (cfg.mlp == "none" && cfg.d_ff > 0)
    throw ConfigError(
        "d_ff",
        fmt::format("a block without an MLP (mlp = \"none\") has no feed-forward width: d_ff = {} would change nothing",
                    cfg.d_ff));
  if (cfg.n_kv_heads < 0 || cfg.n_kv_heads > cfg.n_heads)
    throw ConfigError("n_kv_heads",
                      fmt::format("must be in [0, n_heads = {}] (0: n_heads), got {}", cfg.n_heads, cfg.n_kv_heads));
  if (cfg.n_kv_heads > 0 && cfg.n_heads % cfg.n_kv_heads != 0)
    throw ConfigError(
        "n_kv_heads",
        fmt::format(
            "n_heads = {} is not a multiple of n_kv_heads = {}: query heads share key/value heads in equal groups",
            cfg.n_heads, cfg.n_kv_heads));
  if (cfg.attention_window < 0 || cfg.attention_window > cfg.context)
    throw ConfigError("attention_window",
                      fmt::format("must be in [0, context = {}] (0: none), got {}", cfg.context, cfg.attention_window));
  validate_rope(cfg);
}

// ---- JSON ----------------------------------------------------------------------------------------------

nlohmann::json to_json(const MixerSpec& s) {
  nlohmann::json j = {{"kind", s.kind}};
  if (s.kind == "fast_weight") {
    j["rule"] = s.rule;
    j["feature_map"] = s.feature_map;
    j["norm"] = s.norm;
    j["m"] = s.m;
    j["chunk"] = s.chunk;
    if (const auto* map = find_feature_map(s.feature_map); map && map->uses_nu) j["dpfp_nu"] = s.dpfp_nu;
    if (!s.key_norm.empty()) j["key_norm"] = s.key_norm;   // only when set: older configurations read back unchanged
    if (s.swa_window > 0) j["swa_window"] = s.swa_window;  // only when set: older configurations read back unchanged
    if (s.conv > 0) j["conv"] = s.conv;                    // likewise
    if (s.beta_init != 0.0) j["beta_init"] = s.beta_init;  // likewise
    if (s.gate_init != 0.0) j["gate_init"] = s.gate_init;  // likewise
    if (s.out_norm != "none") j["out_norm"] = s.out_norm;  // likewise
  } else if (s.kind == "base_conv") {
    j["conv"] = s.conv;
  } else if (s.kind == "local") {
    j["window"] = s.window;
  } else if (s.kind == "srupp") {
    j["attention"] = s.attention;
    j["attn_dim"] = s.attn_dim;
  }
  return j;
}

namespace {

template <typename T>
T get_typed(const nlohmann::json& j, const std::string& key, const std::string& field) {
  const auto& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw ConfigError(field, fmt::format("must be a string, got {}", v.dump()));
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw ConfigError(field, fmt::format("must be true or false, got {}", v.dump()));
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) throw ConfigError(field, fmt::format("must be an integer, got {}", v.dump()));
  } else {
    if (!v.is_number()) throw ConfigError(field, fmt::format("must be a number, got {}", v.dump()));
  }
  return v.get<T>();
}

void reject_unknown(const nlohmann::json& j, const std::set<std::string>& known, const std::string& prefix) {
  if (!j.is_object())
    throw ConfigError(prefix.empty() ? "model" : prefix.substr(0, prefix.size() - 1), "must be an object");
  for (const auto& [key, value] : j.items())
    if (!known.count(key)) throw ConfigError(prefix + key, "unknown key");
}

}  // namespace

MixerSpec mixer_spec_from_json(const nlohmann::json& j, const std::string& p) {
  reject_unknown(j,
                 {"kind", "rule", "feature_map", "norm", "key_norm", "m", "dpfp_nu", "window", "attention", "attn_dim",
                  "chunk", "swa_window", "conv", "beta_init", "gate_init", "out_norm"},
                 p);
  MixerSpec s;
  auto opt = [&](const char* key, auto& out) {
    if (j.contains(key)) out = get_typed<std::decay_t<decltype(out)>>(j, key, p + key);
  };
  opt("kind", s.kind);
  opt("rule", s.rule);
  opt("feature_map", s.feature_map);
  opt("norm", s.norm);
  opt("key_norm", s.key_norm);
  opt("m", s.m);
  opt("dpfp_nu", s.dpfp_nu);
  opt("window", s.window);
  opt("attention", s.attention);
  opt("attn_dim", s.attn_dim);
  opt("chunk", s.chunk);
  opt("swa_window", s.swa_window);
  opt("conv", s.conv);
  opt("beta_init", s.beta_init);
  opt("gate_init", s.gate_init);
  opt("out_norm", s.out_norm);
  return s;
}

namespace {

// The block's keys beyond GPT-2's, each written only where it differs from GPT-2's default.
void write_block_keys(const ModelConfig& c, nlohmann::json& j) {
  const ModelConfig d;
  auto put = [&](const char* key, const auto& value, const auto& fallback) {
    if (value != fallback) j[key] = value;
  };
  put("block_norm", c.block_norm, d.block_norm);
  put("positions", c.positions, d.positions);
  put("mlp", c.mlp, d.mlp);
  put("n_kv_heads", c.n_kv_heads, d.n_kv_heads);
  put("tied_head", c.tied_head, d.tied_head);
  put("qkv_bias", c.qkv_bias, d.qkv_bias);
  put("o_bias", c.o_bias, d.o_bias);
  put("mlp_bias", c.mlp_bias, d.mlp_bias);
  put("attention_window", c.attention_window, d.attention_window);
  put("rope_theta", c.rope.theta, d.rope.theta);
  put("rope_scaling", c.rope.scaling, d.rope.scaling);
  put("rope_factor", c.rope.factor, d.rope.factor);
  put("rope_low_freq_factor", c.rope.low_freq_factor, d.rope.low_freq_factor);
  put("rope_high_freq_factor", c.rope.high_freq_factor, d.rope.high_freq_factor);
  put("rope_original_context", c.rope.original_context, d.rope.original_context);
}

const std::set<std::string>& block_keys() {
  static const std::set<std::string> keys = {"block_norm",
                                             "positions",
                                             "mlp",
                                             "n_kv_heads",
                                             "tied_head",
                                             "qkv_bias",
                                             "o_bias",
                                             "mlp_bias",
                                             "attention_window",
                                             "rope_theta",
                                             "rope_scaling",
                                             "rope_factor",
                                             "rope_low_freq_factor",
                                             "rope_high_freq_factor",
                                             "rope_original_context"};
  return keys;
}

}  // namespace

nlohmann::json to_json(const ModelConfig& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : c.layers) layers.push_back(to_json(l));
  nlohmann::json j = {{"vocab", c.vocab},     {"d_model", c.d_model},   {"n_layers", c.n_layers},
                      {"n_heads", c.n_heads}, {"head_dim", c.head_dim}, {"context", c.context},
                      {"d_ff", c.d_ff},       {"dropout", c.dropout},   {"layers", layers}};
  // Written only when they differ from GPT-2's, so the configurations of models built before they existed
  // read back unchanged.
  const ModelConfig defaults;
  if (c.activation != defaults.activation) j["activation"] = c.activation;
  if (c.ln_eps != defaults.ln_eps) j["ln_eps"] = c.ln_eps;
  if (c.lora_rank > 0) j["lora_rank"] = c.lora_rank, j["lora_alpha"] = c.lora_alpha;
  write_block_keys(c, j);
  write_encoder_decoder_keys(c, j);
  return j;
}

namespace {

std::vector<int64_t> layer_list(const nlohmann::json& v, const char* key) {
  if (!v.is_array()) throw ConfigError(key, fmt::format("must be a list of layer indices, got {}", v.dump()));
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) throw ConfigError(key, fmt::format("must hold integers, got {}", e.dump()));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

}  // namespace

ModelConfig model_config_from_json(const nlohmann::json& j) {
  std::set<std::string> known = {"vocab",
                                 "d_model",
                                 "n_layers",
                                 "n_heads",
                                 "head_dim",
                                 "context",
                                 "d_ff",
                                 "dropout",
                                 "activation",
                                 "ln_eps",
                                 "lora_rank",
                                 "lora_alpha",
                                 "layers",
                                 "mixer",
                                 "keep_softmax_every",
                                 "keep_softmax_layers",
                                 "base_conv_layers",
                                 "attention_every",
                                 "encoder_layers",
                                 "cross",
                                 "encoder"};
  known.insert(block_keys().begin(), block_keys().end());
  reject_unknown(j, known, "");
  ModelConfig c;
  auto opt = [&](const char* key, auto& out) {
    if (j.contains(key)) out = get_typed<std::decay_t<decltype(out)>>(j, key, key);
  };
  opt("vocab", c.vocab);
  opt("d_model", c.d_model);
  opt("n_layers", c.n_layers);
  opt("n_heads", c.n_heads);
  opt("head_dim", c.head_dim);
  opt("context", c.context);
  opt("d_ff", c.d_ff);
  opt("dropout", c.dropout);
  opt("activation", c.activation);
  opt("ln_eps", c.ln_eps);
  opt("lora_rank", c.lora_rank);
  opt("lora_alpha", c.lora_alpha);
  opt("block_norm", c.block_norm);
  opt("positions", c.positions);
  opt("mlp", c.mlp);
  opt("n_kv_heads", c.n_kv_heads);
  opt("tied_head", c.tied_head);
  opt("qkv_bias", c.qkv_bias);
  opt("o_bias", c.o_bias);
  opt("mlp_bias", c.mlp_bias);
  opt("attention_window", c.attention_window);
  opt("rope_theta", c.rope.theta);
  opt("rope_scaling", c.rope.scaling);
  opt("rope_factor", c.rope.factor);
  opt("rope_low_freq_factor", c.rope.low_freq_factor);
  opt("rope_high_freq_factor", c.rope.high_freq_factor);
  opt("rope_original_context", c.rope.original_context);
  read_encoder_decoder_keys(j, c);
  if (j.contains("layers")) {
    for (const char* key : {"keep_softmax_layers", "base_conv_layers"})
      if (j.contains(key)) throw ConfigError(key, "applies to a 'mixer' plan, not to an explicit 'layers' list");
    if (j.contains("mixer")) throw ConfigError("mixer", "give either 'layers' or 'mixer' (with a plan), not both");
    if (!j["layers"].is_array()) throw ConfigError("layers", "must be a list of mixer objects");
    for (size_t i = 0; i < j["layers"].size(); ++i)
      c.layers.push_back(mixer_spec_from_json(j["layers"][i], fmt::format("layers[{}].", i)));
  } else {
    LayerPlan plan;
    if (j.contains("mixer")) plan.mixer = mixer_spec_from_json(j["mixer"], "mixer.");
    opt("keep_softmax_every", plan.keep_softmax_every);
    if (j.contains("keep_softmax_layers"))
      plan.keep_softmax_layers = layer_list(j["keep_softmax_layers"], "keep_softmax_layers");
    if (j.contains("base_conv_layers")) plan.base_conv_layers = layer_list(j["base_conv_layers"], "base_conv_layers");
    opt("attention_every", plan.attention_every);
    require_positive(c.n_layers, "n_layers");
    require_at_most(c.n_layers, kMaxLayers, "n_layers");  // before apply_plan allocates one spec per layer
    apply_plan(c, plan);
  }
  validate(c);
  return c;
}

void check_only_mixers_change(const ModelConfig& src, const ModelConfig& target) {
  auto same = [&](const char* field, const auto& a, const auto& b) {
    if (a != b)
      throw ConfigError(
          field, fmt::format("the target model has {} = {} but the source checkpoint has {}; only mixers may change",
                             field, b, a));
  };
  same("vocab", src.vocab, target.vocab);
  same("d_model", src.d_model, target.d_model);
  same("n_layers", src.n_layers, target.n_layers);
  same("encoder_layers", src.encoder_layers, target.encoder_layers);   // the cross attention may change: it is a mixer
  same("encoder", src.encoder.describe(), target.encoder.describe());  // conversion swaps the decoder's mixers only
  same("n_heads", src.n_heads, target.n_heads);
  same("head_dim", src.head_dim, target.head_dim);
  same("context", src.context, target.context);
  same("d_ff", src.ff_dim(), target.ff_dim());
  same("activation", src.activation, target.activation);
  same("ln_eps", src.ln_eps, target.ln_eps);
  same("block_norm", src.block_norm, target.block_norm);
  same("positions", src.positions, target.positions);
  same("mlp", src.mlp, target.mlp);
  same("n_kv_heads", src.kv_heads(), target.kv_heads());
  same("tied_head", src.tied_head, target.tied_head);
  same("qkv_bias", src.qkv_bias, target.qkv_bias);
  same("o_bias", src.o_bias, target.o_bias);
  same("mlp_bias", src.mlp_bias, target.mlp_bias);
  same("attention_window", src.attention_window, target.attention_window);
  same("rope_theta", src.rope.theta, target.rope.theta);
  same("rope_scaling", src.rope.scaling, target.rope.scaling);
  same("rope_factor", src.rope.factor, target.rope.factor);
}

ModelConfig merge_model_config(const ModelConfig& source, const nlohmann::json& overrides) {
  auto merged = to_json(source);
  if (overrides.contains("mixer") || overrides.contains("layers")) merged.erase("layers");
  for (const auto& [key, value] : overrides.items()) merged[key] = value;
  return model_config_from_json(merged);
}

}  // namespace fwlab

namespace fwlab {

ModelConfig resolve_model_config(const ModelConfig* parent, const nlohmann::json& model_keys) {
  try {
    return parent ? merge_model_config(*parent, model_keys) : model_config_from_json(model_keys);
  } catch (const ConfigError& e) {
    throw ConfigError(e.field().empty() ? "model" : "model." + e.field(), e.message());
  }
}

}  // namespace fwlab
