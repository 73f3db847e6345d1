// The token mixers a layer can be, one row each: the torch-free facts validation, parameter counts, state sizes and
// the trainable groups read. models/mixer_registry.cpp builds each row (a test binds the registry to this table), as
// the rule and feature-map tables do for theirs; nothing outside the two compares mixer kinds by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/model/model_config.h"

namespace fwlab {

struct MixerRow {
  std::string name;
  std::string source;                  // where it comes from (paper)
  bool attention_projections = false;  // holds the qkv and o projections (conversion copies them; LoRA adapts them)
  bool recurrent = false;              // carries a fixed-size state from token to token (no cache that grows)
  bool all_new = false;                // every parameter is the mixer's own: attention transfer trains all of it
  int64_t (*parameters)(const MixerSpec&, const ModelConfig&) = nullptr;
  StateSize (*state)(const MixerSpec&, const ModelConfig&) = nullptr;  // carried per sequence in the step form
};

const std::vector<MixerRow>& mixer_table();
// The row of a kind; nullptr for a name that is none.
const MixerRow* find_mixer(const std::string& kind);
std::vector<std::string> mixer_names();

// The parts of a mixer's size every attention-shaped one shares: q, k, v (grouped-query: n_kv_heads key and value
// heads) and o with the biases the block has; and what a fast-weight layer adds (contract/model/model_sizes.cpp).
int64_t attention_projection_parameters(const ModelConfig& c);
int64_t fast_weight_parameters(const MixerSpec& s, const ModelConfig& c);
StateSize fast_weight_state(const MixerSpec& s, const ModelConfig& c);

}  // namespace fwlab
