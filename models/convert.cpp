#include "models/convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "models/checkpoint.h"
#include "models/mixers.h"

namespace fwlab {

std::string ConversionReport::to_string() const {
  std::string out;
  auto section = [&](const char* title, const std::vector<std::string>& names) {
    out += fmt::format("{} ({}):\n", title, names.size());
    for (const auto& n : names) out += "  " + n + "\n";
  };
  section("copied", copied);
  section("created", created);
  section("rescaled", rescaled);
  return out;
}

void copy_shared_tensors(const torch::nn::Module& source, torch::nn::Module& target, ConversionReport& report) {
  std::unordered_map<std::string, torch::Tensor> from;
  for (auto& [name, t] : module_tensors(source)) from.emplace(name, t);
  torch::NoGradGuard guard;
  for (auto& [name, t] : module_tensors(target)) {
    auto it = from.find(name);
    if (it != from.end() && it->second.sizes() == t.sizes()) {
      t.copy_(it->second);
      report.copied.push_back(name);
    } else {
      report.created.push_back(name);
    }
  }
}

void rescale_copied_values(FastWeight& layer, const std::string& prefix, ConversionReport& report) {
  if (!layer.value_rescale().defined()) return;
  const bool copied = std::find(report.copied.begin(), report.copied.end(), prefix + "weight") != report.copied.end();
  if (!copied) return;  // a fresh W_v was already rescaled at construction
  layer.apply_value_rescale();
  const auto why = layer.rule->rescale_reason();
  for (const char* param : {"weight", "bias"}) {
    auto name = prefix + param;
    if (std::erase(report.copied, name) == 0) continue;  // no bias (qkv_bias = false)
    report.rescaled.push_back(fmt::format("{} (value rows {})", name, why));
  }
}

Conversion convert_model(const GPT& source, const ModelConfig& target, uint64_t seed) {
  check_only_mixers_change(source->config(), target);

  torch::manual_seed(seed);
  Conversion result{GPT(target), {}};
  const auto& ref = source->wte->weight;
  result.model->to(ref.device(), ref.scalar_type());
  copy_shared_tensors(*source, *result.model, result.report);
  // Copied value projections are rescaled where the target rule asks for it (Mao 2022), in swapped layers only: a
  // layer that already had this mixer in the source (a finetune continuing a transfer or another finetune) was
  // rescaled when it was created.
  for (size_t i = 0; i < result.model->blocks().size(); ++i) {
    auto fw = std::dynamic_pointer_cast<FastWeight>(result.model->blocks()[i]->mixer);
    if (!fw || (i < source->config().layers.size() && source->config().layers[i] == target.layers[i])) continue;
    rescale_copied_values(*fw, fmt::format("blocks.{}.mixer.qkv.", i), result.report);
  }
  return result;
}

std::vector<size_t> fold_feature_maps(GPT& model) {
  std::vector<size_t> folded;
  for (size_t i = 0; i < model->blocks().size(); ++i) {
    auto fw = std::dynamic_pointer_cast<FastWeight>(model->blocks()[i]->mixer);
    if (fw && fw->foldable() && !fw->folded()) {
      fw->fold_feature_map();
      folded.push_back(i);
    }
  }
  return folded;
}

namespace {

// The base Linear and the adapter of a mixer's qkv and o, whichever mixer holds them.
struct Adapted {
  torch::nn::Linear* base;
  const LoraAdapter* lora;
};

std::vector<Adapted> adapted_projections(Mixer& mixer) {
  if (auto* a = dynamic_cast<AttentionMixer*>(&mixer)) return {{&a->qkv, &a->qkv_lora}, {&a->o, &a->o_lora}};
  return {};
}

}  // namespace

GPT merge_lora(const GPT& model_in) {
  GPT model = model_in;  // the same module; a non-const handle
  auto cfg = model->config();
  cfg.lora_rank = 0, cfg.lora_alpha = 0.0;
  GPT merged(cfg);
  merged->to(model->wte->weight.device(), model->wte->weight.scalar_type());
  torch::NoGradGuard guard;
  auto source = model->named_parameters(), target = merged->named_parameters();
  for (auto& t : target) t.value().copy_(source[t.key()]);
  auto source_buffers = model->named_buffers();
  for (auto& t : merged->named_buffers()) t.value().copy_(source_buffers[t.key()]);
  for (size_t i = 0; i < model->blocks().size(); ++i) {
    auto from = adapted_projections(model->mixer(i)), to = adapted_projections(merged->mixer(i));
    for (size_t j = 0; j < from.size(); ++j)
      if (*from[j].lora) (*to[j].base)->weight.add_((*from[j].lora)->delta());
  }
  return merged;
}

}  // namespace fwlab
