// The registry of Hugging Face architecture families, and the config.json readers they share.
#include <fmt/format.h>

#include <algorithm>

#include "contract/formats/hf/family.h"

namespace fwlab {

using safetensors::FormatError;

const std::vector<const HfFamily*>& hf_families() {
  static const std::vector<const HfFamily*> families = {&gpt2_family(), &llama_family()};
  return families;
}

const HfFamily* hf_family_for_type(const std::string& model_type) {
  for (const auto* f : hf_families())
    if (std::find(f->model_types.begin(), f->model_types.end(), model_type) != f->model_types.end()) return f;
  return nullptr;
}

const HfFamily& hf_family_for(const ModelConfig& cfg) {
  for (size_t i = 0; i < cfg.layers.size(); ++i)
    if (cfg.layers[i].kind != "softmax")
      throw ConfigError(fmt::format("layers[{}].kind", i),
                        fmt::format("'{}' has no Hugging Face form; only models whose layers are all softmax export",
                                    cfg.layers[i].kind));
  if (cfg.lora_rank > 0)
    throw ConfigError("lora_rank", "the model has LoRA adapters: merge them first (fwlab-worker merge-lora)");
  std::string why;
  for (const auto* f : hf_families()) {
    const auto reason = f->cannot_hold(cfg);
    if (reason.empty()) return *f;
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", f->name, reason);
  }
  throw ConfigError("model", "no Hugging Face architecture holds this block (" + why + ")");
}

int64_t hf_int_key(const nlohmann::json& j, const char* key, const std::string& where, bool required,
                   int64_t fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw FormatError(fmt::format("{}: key '{}' is missing", where, key));
    return fallback;
  }
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    throw FormatError(fmt::format("{}: key '{}' must be a positive integer, got {}", where, key, j[key].dump()));
  return j[key].get<int64_t>();
}

double hf_number_key(const nlohmann::json& j, const char* key, const std::string& where, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number())
    throw FormatError(fmt::format("{}: key '{}' must be a number, got {}", where, key, j[key].dump()));
  return j[key].get<double>();
}

bool hf_bool_key(const nlohmann::json& j, const char* key, const std::string& where, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    throw FormatError(fmt::format("{}: key '{}' must be true or false, got {}", where, key, j[key].dump()));
  return j[key].get<bool>();
}

ModelConfig hf_validated(ModelConfig c, const std::string& where) {
  c.layers.assign(static_cast<size_t>(c.n_layers), MixerSpec{});
  try {
    validate(c);
  } catch (const ConfigError& e) {
    throw FormatError(fmt::format("{}: {}", where, e.what()));
  }
  return c;
}

}  // namespace fwlab
