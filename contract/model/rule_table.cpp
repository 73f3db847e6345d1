#include "contract/model/rule_table.h"

#include "contract/model/named_rows.h"

namespace fwlab {

namespace {

int64_t no_rule_parameters(const LayerDims&) { return 0; }
int64_t one_scalar_gate_per_head(const LayerDims& d) { return d.d_model * d.n_heads + d.n_heads; }  // Linear(d, H)
// decay_z: Linear(d, H·hd), decay_f: Linear(d, H·m).
int64_t decay_gates(const LayerDims& d) { return (d.d_model + 1) * d.n_heads * (d.head_dim + d.m); }
// a_proj and b_proj: Linear(d, H) without bias (flash-linear-attention), A_log and dt_bias: [H].
int64_t gated_delta_gates(const LayerDims& d) { return 2 * d.d_model * d.n_heads + 2 * d.n_heads; }
int64_t matrix_state(const LayerDims& d) { return d.n_heads * d.head_dim * d.m; }  // S: hd × m per head

}  // namespace

// Function-local statics only: tests register one case per row at static-initialisation time.
const std::vector<RuleRow>& rule_table() {
  static const std::vector<RuleRow> rows = {
      {"add",
       "Katharopoulos et al. 2020; Schlag et al. 2021",
       true,
       {},
       {"attn", "none"},
       {},
       KernelFamily::decay,
       32,
       no_rule_parameters,
       matrix_state,
       false,
       true},
      // Key normalization: "sum" is Schlag et al.'s; "l2" is DeltaNet's (Yang et al. 2024, "Parallelizing Linear
      // Transformers with the Delta Rule over Sequence Length").
      {"delta",
       "Schlag et al. 2021",
       true,
       {},
       {"attn", "none"},
       {"sum", "l2"},
       KernelFamily::delta,
       0,
       one_scalar_gate_per_head,
       matrix_state,
       true},
      {"gated",
       "Mao 2022, eq. 5",
       true,
       {},
       {"attn", "none"},
       {},
       KernelFamily::decay,
       32,
       one_scalar_gate_per_head,
       matrix_state,
       false,
       false,
       true},
      // Mao 2022, Table 1: decay has no normalized form (N/A).
      {"decay",
       "Mao 2022, sec. 3",
       true,
       {},
       {"none"},
       {},
       KernelFamily::decay,
       8,
       decay_gates,
       matrix_state,
       false,
       false,
       true},
      // Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks": L2-normalised q and k, no normaliser (as
      // flash-linear-attention's GatedDeltaNet layer).
      {"gated_delta",
       "Yang, Kautz & Hatamizadeh 2024",
       false,
       {},
       {"none"},
       {"l2"},
       KernelFamily::delta,
       0,
       gated_delta_gates,
       matrix_state},
  };
  return rows;
}

const RuleRow* find_rule(const std::string& name) { return find_named_row(rule_table(), name); }

std::vector<std::string> rule_names() { return row_names(rule_table()); }

std::vector<std::string> rules_with(bool RuleRow::*property) {
  std::vector<std::string> names;
  for (const auto& row : rule_table())
    if (row.*property) names.push_back(row.name);
  return names;
}

std::string key_norm_of(const MixerSpec& spec) {
  if (!spec.key_norm.empty()) return spec.key_norm;
  const auto* row = find_rule(spec.rule);
  return row && !row->key_norms.empty() ? row->key_norms.front() : std::string();
}

}  // namespace fwlab
