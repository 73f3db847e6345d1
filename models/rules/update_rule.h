// One update rule of a fast-weight layer (NOTES: "Update rules"). Its torch-free row (contract/model/rule_table.h) says
// what it applies to and what it costs; the class here owns the parameters it adds to the layer, turns the layer's
// features and values into the inputs of its kernel family and runs that family. A new rule is one file here,
// its row and one line in registry.cpp.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "contract/model/rule_table.h"
#include "kernels/common/recurrence.h"
#include "models/mixer.h"

namespace fwlab {

// What a recurrence reads, [B, H, T, .].
struct RuleInputs {
  torch::Tensor fq, fk, v;     // features (after the rule's own normalization) and values
  torch::Tensor log_a, log_b;  // decay family: value- / key-side log decay (undefined: none)
  torch::Tensor write;         // decay family: what scales the written value ((1 - g) for the gated rule)
  torch::Tensor alpha, beta;   // delta family: decay α ∈ [0, 1] (undefined: none) and write strength β
};

// What a rule's forms need besides its inputs.
struct RuleRun {
  MixerState* state = nullptr;  // step form: S (and z) before, updated after; null in the parallel form
  bool attn_norm = false;       // `norm = "attn"`: y divided by the normaliser z·φ(q)
  bool reference = false;       // the plain per-timestep kernels (tests)
  int64_t chunk = 0;            // chunk length of a chunked form
};

class UpdateRule {
 public:
  // The rule's row (contract/model/rule_table.h) and its key normalization are resolved here, once: the forms a
  // layer runs read them from the rule, not by name.
  explicit UpdateRule(const MixerSpec& spec) : spec_(spec), row_(*find_rule(spec.rule)), key_norm_(key_norm_of(spec)) {}
  virtual ~UpdateRule() = default;

  const RuleRow& row() const { return row_; }
  const std::string& key_norm() const { return key_norm_; }  // "" for rules that normalise no keys

  // The projections of the layer input x [B, T, d_model] the rule's gates read (z and f, β, α), in the order
  // prepare() receives their outputs: the layer computes them in one product with q, k and v
  // (models/fused_projection.h).
  virtual std::vector<torch::nn::Linear> gate_projections() const { return {}; }
  // The gates from their projections' outputs [B, T, width] (gate_projections()), and the rule's normalization of
  // in.fq and in.fk.
  virtual void prepare(RuleInputs& in, const std::vector<torch::Tensor>& gates) = 0;
  // y [B, H, T, hd] (normalised with attn_norm) and the final state S; sets run.state->z where it keeps one.
  virtual kernels::RecurrenceResult recur(const RuleInputs& in, const RuleRun& run) const = 0;
  // The coefficient of v_s in y_t, [B, H, C, T, T] (Mixer::value_coefficients), normaliser included.
  virtual torch::Tensor value_coefficients(const RuleInputs& in, bool attn_norm) const = 0;
  // The factor applied to the value projection's rows when the layer is created or converted (undefined: none),
  // and the words the conversion report gives for it.
  virtual torch::Tensor value_rescale(int64_t inner, const torch::TensorOptions& options) const { return {}; }
  virtual std::string rescale_reason() const { return {}; }

 protected:
  const MixerSpec spec_;
  const RuleRow& row_;
  const std::string key_norm_;
};

// `layer` is the fast-weight module: a rule registers its parameters on it, under the names checkpoints use.
using RuleFactory = std::unique_ptr<UpdateRule> (*)(torch::nn::Module& layer, const MixerSpec& spec,
                                                    const ModelConfig& cfg);

// The rule named by spec.rule (models/rules/registry.cpp); throws ConfigError for a name it does not hold.
std::unique_ptr<UpdateRule> make_rule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg);
// The names the registry holds (a test binds them to contract/model/rule_table.h).
std::vector<std::string> registered_rules();

// [B, T, H*e] -> [B, H, T, e]
torch::Tensor split_heads(const torch::Tensor& x, int64_t n_heads);
// Uniform Gate Initialization (Gu et al. 2020): u ~ U[1/n, 1 - 1/n], b = logit(u), n = the gate's width; with
// `gate_init` > 0 (the layer's `gate_init`) every bias is logit(gate_init) instead.
void uniform_gate_init(torch::Tensor& bias, double gate_init);

}  // namespace fwlab
