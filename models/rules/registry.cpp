// The update rules fwlab knows, by name: a new rule is its files and one line here (and its row in
// contract/model/rule_table.cpp, which a test binds to this list).
#include <fmt/format.h>

#include "contract/model/named_rows.h"
#include "models/rules/add.h"
#include "models/rules/decay.h"
#include "models/rules/delta.h"
#include "models/rules/gated.h"
#include "models/rules/gated_delta.h"

namespace fwlab {

namespace {

struct RuleRow {
  std::string name;
  RuleFactory make;
};

const std::vector<RuleRow>& rule_rows() {
  static const std::vector<RuleRow> rules = {
      {"add", make_add_rule},
      {"delta", make_delta_rule},
      {"gated", make_gated_rule},
      {"decay", make_decay_rule},
      {"gated_delta", make_gated_delta_rule},
  };
  return rules;
}

}  // namespace

std::unique_ptr<UpdateRule> make_rule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg) {
  if (const auto* entry = find_named_row(rule_rows(), spec.rule)) return entry->make(layer, spec, cfg);
  throw ConfigError("rule", fmt::format("no update rule '{}' is registered", spec.rule));
}

std::vector<std::string> registered_rules() { return row_names(rule_rows()); }

}  // namespace fwlab
