// Model and token-mixer configuration. Deliberately free of libtorch: the orchestrator uses it to validate
// experiment grids and to report parameter counts and state sizes without loading a model.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace fwlab {

// Error in a configuration; `field` is the dotted path of the offending key (e.g. "layers[2].norm").
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string field, const std::string& message);
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  std::string field_, message_;
};

// The token mixer of one layer.
struct MixerSpec {
  std::string kind =
      "softmax";  // a row of contract/model/mixer_table.h (softmax | local | fast_weight | sru | srupp | base_conv)
  std::string rule =
      "add";  // fast_weight: a row of contract/model/rule_table.h (add | gated | delta | decay | gated_delta)
  std::string feature_map = "relu";  // fast_weight: a row of contract/model/feature_map_table.h (relu | elu1 | identity
                                     // | dpfp | rfa | hedgehog)
  std::string norm = "none";         // fast_weight: attn | none, as the rule's row allows
  std::string key_norm;   // fast_weight, delta family: sum | l2 as the rule's row allows; empty: the rule's default
  int64_t m = 0;          // fast_weight: feature (= state key) size per head
  int64_t dpfp_nu = 1;    // dpfp: nu, feature size = 2 * nu * head_dim
  int64_t window = 32;    // local: attention window (tokens, the current one included)
  bool attention = true;  // srupp: whether this layer has attention
  int64_t attn_dim = 0;   // srupp: attention size d' (0: d_model / 4, as in SRU++)
  int64_t chunk = 0;      // fast_weight: chunk length of the parallel form (0: chosen per rule)
  // fast_weight: softmax attention over the last swa_window tokens (the current one included), mixed half and
  // half with the fast-weight output (Liger's 0.5 SWA + 0.5 linear); 0: none (models/README.md).
  int64_t swa_window = 0;
  // fast_weight: a depthwise causal convolution of this many taps, then SiLU, on the q, k and v projections
  // before the feature map (DeltaNet's and Gated DeltaNet's ShortConvolution, Zoology's token shift); 0: none.
  // base_conv: the taps of its convolution (Zoology's BaseConv, models/base_conv.h).
  int64_t conv = 0;
  // fast_weight, a rule whose β has a bias (the rule table's beta_bias: delta): the write strength β's initial
  // value σ(b_β) (0: the rule's own, Mao's 0.007 for delta).
  double beta_init = 0.0;
  // fast_weight, a rule whose gate biases start by uniform gate initialisation (the rule table's ugi_gates: gated,
  // decay): every such gate's initial value σ(b) (0: UGI, Gu et al. 2020, as Mao 2022 configures the decay rule).
  double gate_init = 0.0;
  // fast_weight: a normalisation of each head's output before the output projection: none | rmsnorm (RMSNorm over
  // the head's value dimension with a learned weight shared by the heads: DeltaNet's and Gated DeltaNet's o_norm).
  std::string out_norm = "none";

  bool is_recurrent() const;     // its row in contract/model/mixer_table.h: a fixed-size state, no cache that grows
  std::string describe() const;  // short human-readable name, e.g. "decay/identity/none/m=4"
  bool operator==(const MixerSpec&) const = default;
};

// Rotary position embedding (Su et al. 2021) and its context-extension scalings as Hugging Face computes them.
struct RopeSpec {
  double theta = 10000.0;           // rope_theta
  std::string scaling = "none";     // none | linear | llama3
  double factor = 1.0;              // linear, llama3: frequencies divided by it
  double low_freq_factor = 1.0;     // llama3
  double high_freq_factor = 4.0;    // llama3
  int64_t original_context = 8192;  // llama3: original_max_position_embeddings
  bool operator==(const RopeSpec&) const = default;
};

struct ModelConfig {
  int64_t vocab = 256;
  int64_t d_model = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t head_dim = 32;
  int64_t context = 256;
  int64_t d_ff = 0;  // 0: 4 * d_model (GPT-2)
  double dropout = 0.1;
  // GPT-2's MLP nonlinearity: "gelu_tanh" (gelu_new, the tanh approximation GPT-2 was trained with) or "gelu"
  // (the exact erf form, Hugging Face's "gelu"); and the LayerNorm epsilon (layer_norm_epsilon).
  std::string activation = "gelu_tanh";  // also "silu" (Llama's SwiGLU)
  double ln_eps = 1e-5;                  // of LayerNorm, or RMSNorm's epsilon (rms_norm_eps)
  // The block's parts beyond GPT-2's (Llama, Mistral, Qwen2; models/README.md). Defaults are GPT-2's, and are
  // not written to JSON, so configurations of models built before these existed read back unchanged.
  std::string block_norm = "layernorm";  // layernorm | rmsnorm (no bias)
  std::string positions = "learned";     // learned (wpe) | rope (rotary, on q and k of attention projections)
                                         // | none (Zoology's synthetic-task models: order comes from convolutions)
  std::string mlp = "plain";             // plain: proj(act(fc x)) | gated: down(act(gate x) * up x) (SwiGLU with silu)
                                         // | none: the mixer alone (Zoology's synthetic-task models)
  int64_t n_kv_heads = 0;                // grouped-query attention: key/value heads (0: n_heads)
  bool tied_head = true;                 // output projection = token embedding (GPT-2); false: its own lm_head
  bool qkv_bias = true, o_bias = true, mlp_bias = true;  // Llama: none; Qwen2: q, k, v only
  int64_t attention_window = 0;  // softmax layers see the last W keys, the current one included (Mistral)
  RopeSpec rope;                 // with positions = rope
  // LoRA (Hu et al. 2021) on the attention projections of every softmax, local and fast-weight layer: rank r
  // adapters for q, k, v and o each, scaled by alpha / r (alpha 0: alpha = r). 0: none (models/lora.h).
  int64_t lora_rank = 0;
  double lora_alpha = 0.0;
  std::vector<MixerSpec> layers;  // one per layer, bottom first
  // Encoder-decoder (translation, models/seq2seq/seq2seq.h; contract/model/encoder_decoder.cpp): encoder_layers > 0
  // puts a bidirectional softmax encoder of that many layers under the decoder, and cross attention `cross` in every
  // decoder layer; n_layers and layers are then the decoder's. The papers' fairseq transformer: post-LN, shared
  // source / target / output embeddings scaled by sqrt(d_model), sinusoidal positions, ReLU MLP.
  int64_t encoder_layers = 0;
  MixerSpec cross;    // softmax, or fast_weight with rule add and norm attn (T2R's fast-weight read, m = m_cross)
  MixerSpec encoder;  // the encoder layers' mixer: softmax, or srupp (bidirectional SRU++, attention over the source)

  bool encoder_decoder() const { return encoder_layers > 0; }
  int64_t ff_dim() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  bool rope_positions() const { return positions == "rope"; }
  // Whether positions past `context` have no representation: a learned table (wpe) has `context` rows; rotary,
  // sinusoidal and no positions are defined at any position, so generation may run past the trained length.
  bool bounded_positions() const { return positions == "learned"; }
  double lora_scale() const {
    return lora_rank > 0
               ? (lora_alpha > 0 ? lora_alpha : static_cast<double>(lora_rank)) / static_cast<double>(lora_rank)
               : 0.0;
  }
  bool operator==(const ModelConfig&) const = default;
};

// How one mixer is laid over the layers of a model. Hybrids are expressed here rather than by listing layers.
struct LayerPlan {
  MixerSpec mixer;
  // Keep every n-th layer counted from the top as softmax (T2R 75%: n = 4 keeps layers L-4, L-8, ...).
  int64_t keep_softmax_every = 0;
  // Keep exactly these layers (0 = bottom) as softmax, e.g. the layers a search found best to keep.
  std::vector<int64_t> keep_softmax_layers = {};
  // srupp: attention in layer i iff (i + 1) % k == 0 (SRU++); k = n_layers: last layer only; 0: none.
  int64_t attention_every = 1;
  // These layers (0 = bottom) are Zoology's gated short convolution (base_conv_mixer()): its synthetic-task models
  // alternate one with the mixer under study.
  std::vector<int64_t> base_conv_layers = {};
};

// Zoology's BaseConv as its MQAR models configure it ("Zoology", Arora et al. 2023): a 3-tap convolution.
MixerSpec base_conv_mixer();

// Metadata key of an fwlab checkpoint (safetensors __metadata__) holding its model configuration as JSON.
inline constexpr const char* kModelConfigKey = "fwlab.model_config";

// The configuration a job builds from a source configuration: `overrides` (the job's model keys) replace the
// source's keys, and a new mixer plan ("mixer" or "layers") replaces the source's layers. Throws ConfigError.
ModelConfig merge_model_config(const ModelConfig& source, const nlohmann::json& overrides);

// The model a job builds, as the harness plans it and the worker builds it: its model keys alone (from
// scratch), or the configuration of the checkpoint it starts from (`parent`) with its model keys merged over it.
// Throws ConfigError naming the job key ("model.<field>").
ModelConfig resolve_model_config(const ModelConfig* parent, const nlohmann::json& model_keys);

// Swap-then-finetune keeps everything but the mixers: throws ConfigError naming the first other field that
// differs between the source and the target configuration.
void check_only_mixers_change(const ModelConfig& source, const ModelConfig& target);

// Fills cfg.layers from a plan.
void apply_plan(ModelConfig& cfg, const LayerPlan& plan);

// Rejects combinations that make no sense; throws ConfigError naming the field.
void validate(const ModelConfig& cfg);
void validate_block(const ModelConfig& cfg);  // the block's parts beyond the mixers (norm, positions, MLP, heads)
void validate_mixer(const MixerSpec& spec, const ModelConfig& cfg, const std::string& field_prefix);
// ConfigError(field, "'VALUE' is not one of A, B (did you mean 'A'?)") unless value is one of `allowed`.
void require_one_of(const std::string& value, const std::vector<std::string>& allowed, const std::string& field);
// The mixer keys whose value is one of a list of names, with the names: the harness checks them all at once, so that
// a file with two misspelt names hears of both.
std::vector<std::pair<std::string, std::vector<std::string>>> mixer_name_keys();
// The encoder-decoder's keys (contract/model/encoder_decoder.cpp): what validate(), the JSON round trip and the
// parameter count add for a model with encoder_layers > 0.
void validate_encoder_decoder(const ModelConfig& cfg);
void read_encoder_decoder_keys(const nlohmann::json& j, ModelConfig& cfg);
void write_encoder_decoder_keys(const ModelConfig& cfg, nlohmann::json& j);
int64_t encoder_decoder_parameters(const ModelConfig& cfg);  // encoder layers and cross attention

// JSON round trip. from_json accepts either an explicit "layers" list or a "mixer" object plus the plan keys
// "keep_softmax_every" / "attention_every"; unknown keys are errors. The result is validated.
nlohmann::json to_json(const ModelConfig& cfg);
ModelConfig model_config_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MixerSpec& spec);
MixerSpec mixer_spec_from_json(const nlohmann::json& j, const std::string& field_prefix);

// Whether a mixer has the q, k, v, o projections (qkv, o) that LoRA adapts.
bool has_attention_projections(const MixerSpec& spec);
// Every layer is softmax attention: a teacher for attention transfer and the attention analysis.
bool softmax_only(const ModelConfig& cfg);
// Parameter count computed from the configuration alone (tied output projection counted once).
int64_t count_parameters(const ModelConfig& cfg);

// Recurrent state carried per sequence during generation: a fixed part plus a part that grows per token
// (the KV cache of softmax attention).
struct StateSize {
  int64_t fixed = 0;      // elements
  int64_t per_token = 0;  // elements added per generated token
  int64_t elements_at(int64_t tokens) const { return fixed + per_token * tokens; }
};
StateSize mixer_state_size(const MixerSpec& spec, const ModelConfig& cfg);
StateSize state_size(const ModelConfig& cfg);
// What the decoder's cross attention holds per sentence (contract/model/encoder_decoder.cpp): a fast-weight read's S
// and z (fixed), or nothing counted here for softmax, whose cache is the encoder's keys and values (per source token).
StateSize cross_state_size(const ModelConfig& cfg);

}  // namespace fwlab
