// An architecture family of Hugging Face checkpoints: what its config.json means, which tensors it holds and how
// they map onto fwlab's module tree. A new family is one file defining an HfFamily and one line in
// contract/formats/hf/families.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/formats/hf/checkpoint.h"

namespace fwlab {

struct HfFamily {
  std::string name;                        // gpt2 | llama
  std::vector<std::string> model_types;    // config.json "model_type" values it reads
  std::vector<std::string> architectures;  // config.json "architectures" values it reads (the causal-LM heads)
  // config.json -> the softmax model it describes; FormatError naming `where` and the key at fault.
  ModelConfig (*config_from_json)(const nlohmann::json& j, const std::string& where);
  // Whether the family can hold a model of this block (all-softmax is checked by the caller); "" or why not.
  std::string (*cannot_hold)(const ModelConfig& cfg);
  std::vector<HfName> (*names)(const ModelConfig& cfg);
  nlohmann::json (*config_json)(const ModelConfig& cfg);
  std::string tensor_prefix;  // stripped on import when present, written on export ("transformer." for GPT-2)
  bool (*ignored)(const std::string& name);          // tensors that are not parameters
  std::string (*size_keys)(const ModelConfig& cfg);  // the config.json sizes a shape error quotes
};

const std::vector<const HfFamily*>& hf_families();
// By config.json's model_type; null when no family reads it.
const HfFamily* hf_family_for_type(const std::string& model_type);
// The family that holds `cfg`; throws ConfigError naming the field when none does.
const HfFamily& hf_family_for(const ModelConfig& cfg);

// Families (one per file).
const HfFamily& gpt2_family();
const HfFamily& llama_family();

// Shared by the families' config readers.
int64_t hf_int_key(const nlohmann::json& j, const char* key, const std::string& where, bool required = true,
                   int64_t fallback = 0);
double hf_number_key(const nlohmann::json& j, const char* key, const std::string& where, double fallback);
bool hf_bool_key(const nlohmann::json& j, const char* key, const std::string& where, bool fallback);
// The configuration validated, its errors as FormatError naming `where`.
ModelConfig hf_validated(ModelConfig c, const std::string& where);

}  // namespace fwlab
