// The encoder-decoder's configuration keys (models/seq2seq/seq2seq.h): checked and read here so that model_config.cpp
// only calls in. A decoder-only model never sees them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "contract/model/model_config.h"
#include "contract/model/rule_table.h"

namespace fwlab {

namespace {

constexpr int64_t kMaxEncoderLayers = int64_t{1} << 12;

// The parts of the papers' fairseq transformer that the encoder-decoder builds in: a key that would ask for
// another block is refused rather than ignored.
void require_fairseq_block(const ModelConfig& c) {
  auto refuse = [](const char* key, const std::string& why) { throw ConfigError(key, "the encoder-decoder " + why); };
  if (c.positions != "sinusoidal") refuse("positions", fmt::format("uses sinusoidal positions, not '{}'", c.positions));
  if (c.block_norm != "layernorm") refuse("block_norm", "is post-LN with LayerNorm");
  if (c.mlp != "plain") refuse("mlp", "has the plain MLP");
  if (c.kv_heads() != c.n_heads) refuse("n_kv_heads", "has one key/value head per query head");
  if (!c.tied_head) refuse("tied_head", "shares its source, target and output embeddings");
  if (c.lora_rank > 0) refuse("lora_rank", "has no LoRA adapters");
  if (c.attention_window > 0) refuse("attention_window", "has no attention window");
}

void validate_cross(const ModelConfig& c) {
  const auto& s = c.cross;
  if (s.kind != "softmax" && s.kind != "fast_weight")
    throw ConfigError(
        "cross.kind",
        fmt::format("cross attention is 'softmax' or 'fast_weight' (T2R's read of the summed source), got '{}'",
                    s.kind));
  if (s.kind == "softmax") return;
  // The source is read whole at every step: there is no order to decay or gate over, only T2R's sum.
  if (const auto* rule = find_rule(s.rule); rule && !rule->reads_a_source)  // an unknown name: validate_mixer says so
    throw ConfigError("cross.rule", fmt::format("cross attention sums the source (rule '{}'), got '{}'",
                                                fmt::join(rules_with(&RuleRow::reads_a_source), "' or '"), s.rule));
  if (s.norm != "attn") throw ConfigError("cross.norm", "cross attention divides by phi(q).z (norm 'attn', T2R)");
  if (s.swa_window > 0) throw ConfigError("cross.swa_window", "cross attention has no sliding window");
  if (s.conv > 0)
    throw ConfigError("cross.conv", "cross attention reads the whole source: it has no short convolution");
  if (s.out_norm != "none")
    throw ConfigError("cross.out_norm", "cross attention is T2R's normalised read: it has no output norm");
  validate_mixer(s, c, "cross.");
}

void validate_encoder(const ModelConfig& c) {
  const auto& s = c.encoder;
  if (s.kind != "softmax" && s.kind != "srupp")
    throw ConfigError(
        "encoder.kind",
        fmt::format("the encoder's mixer is 'softmax' or 'srupp' (bidirectional SRU++), got '{}'", s.kind));
  if (s.kind == "srupp" && c.d_model % 2 != 0)
    throw ConfigError(
        "d_model",
        fmt::format("a bidirectional SRU++ encoder gives each direction half the width: {} is odd", c.d_model));
  validate_mixer(s, c, "encoder.");
}

}  // namespace

void validate_encoder_decoder(const ModelConfig& c) {
  if (c.encoder_layers < 0 || c.encoder_layers > kMaxEncoderLayers)
    throw ConfigError("encoder_layers", fmt::format("must be in [0, {}] (0: a decoder-only model), got {}",
                                                    kMaxEncoderLayers, c.encoder_layers));
  if (!c.encoder_decoder()) {
    if (c.positions == "sinusoidal")
      throw ConfigError("positions", "sinusoidal positions are the encoder-decoder's (encoder_layers > 0)");
    return;
  }
  require_fairseq_block(c);
  validate_cross(c);
  validate_encoder(c);
}

void read_encoder_decoder_keys(const nlohmann::json& j, ModelConfig& c) {
  if (j.contains("encoder_layers")) {
    if (!j["encoder_layers"].is_number_integer())
      throw ConfigError("encoder_layers", fmt::format("must be an integer, got {}", j["encoder_layers"].dump()));
    c.encoder_layers = j["encoder_layers"].get<int64_t>();
  }
  for (const char* key : {"cross", "encoder"}) {
    if (!j.contains(key)) continue;
    if (!c.encoder_decoder()) throw ConfigError(key, "changes nothing without an encoder (encoder_layers > 0)");
    (std::string(key) == "cross" ? c.cross : c.encoder) = mixer_spec_from_json(j[key], std::string(key) + ".");
  }
  if (!c.encoder_decoder()) return;
  // fairseq's transformer: its positions and activation unless the configuration names them.
  if (!j.contains("positions")) c.positions = "sinusoidal";
  if (!j.contains("activation")) c.activation = "relu";
}

void write_encoder_decoder_keys(const ModelConfig& c, nlohmann::json& j) {
  if (!c.encoder_decoder()) return;  // decoder-only configurations read back unchanged
  j["encoder_layers"] = c.encoder_layers;
  j["cross"] = to_json(c.cross);
  if (!(c.encoder == MixerSpec{}))
    j["encoder"] = to_json(c.encoder);  // only when set: earlier configurations read back unchanged
}

}  // namespace fwlab
