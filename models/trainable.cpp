#include "models/trainable.h"

#include "contract/model/mixer_table.h"

#include <stdexcept>

namespace fwlab {

namespace {

// "blocks.N.mixer.REST" -> {N, REST}; {-1, ""} for parameters outside a mixer.
std::pair<int64_t, std::string> mixer_parameter(const std::string& name) {
  const std::string blocks = "blocks.", mixer = ".mixer.";
  if (name.rfind(blocks, 0) != 0) return {-1, ""};
  const auto at = name.find(mixer, blocks.size());
  if (at == std::string::npos) return {-1, ""};
  return {std::stoll(name.substr(blocks.size(), at - blocks.size())), name.substr(at + mixer.size())};
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

bool trains(const std::string& name, const ModelConfig& cfg, const std::string& trainable) {
  if (trainable == "all") return true;
  if (trainable == "lora") return name.find("_lora.") != std::string::npos;
  const auto [layer, rest] = mixer_parameter(name);
  const std::string kind = layer >= 0 ? cfg.layers.at(static_cast<size_t>(layer)).kind : "";
  const bool feature_map = kind == "fast_weight" && starts_with(rest, "phi.");
  if (trainable == "no_feature_maps") return !feature_map;
  if (trainable == "new_mixers") {
    if (const auto* row = find_mixer(kind); row && row->all_new) return true;  // sru, srupp, base_conv
    return kind == "fast_weight" && !starts_with(rest, "qkv.") && !starts_with(rest, "o.");
  }
  throw std::invalid_argument("'" + trainable + "' is not all, new_mixers, no_feature_maps or lora");
}

std::vector<std::string> select_trainable(GPT& model, const std::string& trainable) {
  std::vector<std::string> out;
  for (auto& p : model->named_parameters()) {
    const bool on = trains(p.key(), model->config(), trainable);
    p.value().set_requires_grad(on);
    if (on) out.push_back(p.key());
  }
  if (out.empty())
    throw std::invalid_argument("'" + trainable + "' leaves nothing to train: " +
                                (trainable == "lora" ? "the model has no LoRA adapters (set model.lora_rank)"
                                                     : "the model has no fast-weight or SRU layer"));
  return out;
}

}  // namespace fwlab
