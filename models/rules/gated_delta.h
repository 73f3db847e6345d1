// The 'gated_delta' update rule (contract/model/rule_table.h holds its row; registry.cpp registers it).
#pragma once

#include "models/rules/update_rule.h"

namespace fwlab {

std::unique_ptr<UpdateRule> make_gated_delta_rule(torch::nn::Module& layer, const MixerSpec& spec,
                                                  const ModelConfig& cfg);

}  // namespace fwlab
