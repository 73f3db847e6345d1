// Parameter groups: which parameters a job trains (train.trainable, contract/job/job_spec.h). Frozen parameters get
// requires_grad = false, so the optimizer never sees them and they stay bit-identical.
#pragma once

#include <string>
#include <vector>

#include "models/gpt.h"

namespace fwlab {

// Whether parameter `name` of a model with configuration `cfg` trains under `trainable`:
//   all             every parameter;
//   new_mixers      the parameters a swapped-in mixer has and softmax attention has not: a fast-weight layer's
//                   feature map (phi), gates and decays (not its qkv / o projections, which conversion copies),
//                   every parameter of an SRU / SRU++ layer (LoLCATs' attention transfer trains these);
//   no_feature_maps everything but the fast-weight feature maps (T2R's "MLP frozen" variant);
//   lora            only the LoRA adapters (model.lora_rank > 0; models/lora.h), the base frozen (LoLCATs' second
//   stage).
bool trains(const std::string& name, const ModelConfig& cfg, const std::string& trainable);

// Applies `trainable` to the model's parameters; returns the names that train. Throws std::invalid_argument
// when none would (e.g. new_mixers on a model of softmax layers only).
std::vector<std::string> select_trainable(GPT& model, const std::string& trainable);

}  // namespace fwlab
