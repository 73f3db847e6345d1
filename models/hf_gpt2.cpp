#include "models/hf_gpt2.h"

#include <fmt/format.h>

#include <filesystem>
#include <unordered_map>

#include "contract/events.h"
#include "models/checkpoint.h"

namespace fwlab {

namespace fs = std::filesystem;
using safetensors::FormatError;

HfImport load_hf_gpt2(const std::string& dir) {
  const auto ck = read_hf_checkpoint(dir);
  std::unordered_map<std::string, torch::Tensor> loaded;  // by name: the index puts each name in one shard
  for (const auto& t : ck.tensors)
    if (!loaded.count(t.hf_name))
      for (auto& [name, tensor] : load_tensors(t.file)) loaded.emplace(name, std::move(tensor));
  auto data = [&](const HfTensor& t) { return loaded.at(t.hf_name); };
  // The model takes the dtype of wte (all of GPT-2's tensors share one); others are cast to it, and say so.
  torch::ScalarType dtype = torch::kFloat32;
  for (const auto& t : ck.tensors)
    if (t.fwlab_name == "wte.weight") dtype = data(t).scalar_type();

  HfImport out;
  NamedTensors named;
  torch::Tensor wte, lm_head;
  for (const auto& t : ck.tensors) {
    nlohmann::json entry = {{"hf", t.hf_name}, {"file", fs::path(t.file).filename().string()}, {"op", to_string(t.op)}};
    if (t.op == HfOp::ignore) {
      out.record.push_back(entry);
      continue;
    }
    auto x = data(t);
    if (x.scalar_type() != dtype) {
      entry["cast"] = fmt::format("{} -> {}", c10::toString(x.scalar_type()), c10::toString(dtype));
      x = x.to(dtype);
    }
    if (t.op == HfOp::tied) {
      lm_head = x;
      entry["to"] = "wte.weight";
    } else {
      if (t.op == HfOp::transpose) x = x.t().contiguous();
      if (t.fwlab_name == "wte.weight") wte = x;
      named.emplace_back(t.fwlab_name, x);
      entry["to"] = t.fwlab_name;
    }
    out.record.push_back(entry);
  }
  if (lm_head.defined() && !torch::equal(lm_head, wte))
    throw FormatError(fmt::format("{}: lm_head.weight differs from wte.weight: an untied output projection, which fwlab's GPT "
                                  "(output tied to the token embedding, as GPT-2) does not have", dir));
  out.model = GPT(ck.config);
  out.model->to(dtype);
  load_into(out.model, named, dir);
  return out;
}

void export_hf_gpt2(const GPT& model, const std::string& dir) {
  const auto& cfg = model->config();
  for (size_t i = 0; i < cfg.layers.size(); ++i)
    if (cfg.layers[i].kind != "softmax")
      throw ConfigError(fmt::format("layers[{}].kind", i),
                        fmt::format("'{}' has no Hugging Face GPT-2 form; only models whose layers are all softmax export", cfg.layers[i].kind));
  if (cfg.n_heads * cfg.head_dim != cfg.d_model)
    throw ConfigError("head_dim", fmt::format("GPT-2 needs n_heads * head_dim = d_model, got {} * {} != {}", cfg.n_heads, cfg.head_dim, cfg.d_model));
  std::unordered_map<std::string, torch::Tensor> params;
  for (auto& [name, t] : model_tensors(model)) params.emplace(name, t);
  NamedTensors out;
  for (const auto& n : hf_names(cfg)) {
    auto it = params.find(n.fwlab);
    if (it == params.end()) throw std::logic_error(fmt::format("export: the model has no '{}'", n.fwlab));
    out.emplace_back("transformer." + n.hf, n.transposed ? it->second.t().contiguous() : it->second);
    params.erase(it);
  }
  if (!params.empty()) throw std::logic_error(fmt::format("export: '{}' has no Hugging Face name", params.begin()->first));
  fs::create_directories(dir);
  save_tensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), hf_config_json(cfg).dump(2) + "\n");
}

GPT load_source_model(const std::string& source, nlohmann::json* import_record) {
  if (!is_hf_source(source)) return load_model(source);
  auto imported = load_hf_gpt2(hf_dir(source));
  if (import_record) *import_record = std::move(imported.record);
  return imported.model;
}

}  // namespace fwlab
