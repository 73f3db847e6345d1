// The update rules of a fast-weight layer, one row each: the torch-free facts that validation, parameter counts,
// state sizes, planning and --dry-run read. models/rules/ implements each row (its registry is checked against
// this table by a test); nothing outside the two compares rule names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/model/model_config.h"

namespace fwlab {

// The sizes a rule's or a feature map's formulas read.
struct LayerDims {
  int64_t d_model = 0, n_heads = 0, head_dim = 0, m = 0;
};

// Which recurrence kernels a rule runs. decay: S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_tᵀ (add, gated and
// decay are special cases; chunked form on CUDA and in libtorch). delta: key-dependent writes, S_t = α_t S_{t-1}
// (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ (sequential fused kernels).
enum class KernelFamily { decay, delta };

struct RuleRow {
  std::string name;
  std::string source;                     // where the rule comes from (paper)
  bool in_mao_2022 = false;               // one of the four rules of Mao 2022's tables
  std::vector<std::string> feature_maps;  // the maps that apply; empty: every map
  std::vector<std::string> norms;         // the `norm` values that apply
  std::vector<std::string>
      key_norms;  // the `key_norm` values that apply, the default first; empty: the key is not used
  KernelFamily family = KernelFamily::decay;
  int64_t default_chunk = 0;                          // chunk of the parallel form when `chunk` = 0; 0: no chunked form
  int64_t (*parameters)(const LayerDims&) = nullptr;  // what the rule adds to a layer
  int64_t (*state_elements)(const LayerDims&) = nullptr;  // the state S per sequence (a normaliser comes on top)
  // The write strength β = σ(w_β·x + b_β) has a bias whose initial value `beta_init` sets (the delta rule; the
  // gated delta rule's β, as fla's, has none).
  bool beta_bias = false;
  // The rule can read a whole source sentence as decoder cross attention: it sums the source once (add), with
  // nothing in it that depends on the order of the source tokens.
  bool reads_a_source = false;
  // Its gates' biases start by uniform gate initialisation (Gu et al. 2020, Mao's choice), which `gate_init`
  // replaces by one initial value.
  bool ugi_gates = false;
};

const std::vector<RuleRow>& rule_table();
// The row of a rule; nullptr for a name that is none.
const RuleRow* find_rule(const std::string& name);
std::vector<std::string> rule_names();
// The names of the rules that have a property (&RuleRow::beta_bias, &RuleRow::reads_a_source), for errors.
std::vector<std::string> rules_with(bool RuleRow::*property);
// The key normalization a fast-weight layer runs: its `key_norm`, or its rule's default (empty: none).
std::string key_norm_of(const MixerSpec& spec);

}  // namespace fwlab
