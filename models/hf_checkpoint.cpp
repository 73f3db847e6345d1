#include "models/hf_checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "contract/events.h"
#include "models/checkpoint.h"

namespace fwlab {

namespace fs = std::filesystem;
using safetensors::FormatError;

namespace {

// Every tensor of the checkpoint by its name in the files (the index puts each name in one shard).
std::unordered_map<std::string, torch::Tensor> load_all(const HfCheckpoint& ck) {
  std::unordered_map<std::string, torch::Tensor> loaded;
  for (const auto& t : ck.tensors)
    if (!loaded.count(t.hf_name))
      for (auto& [name, tensor] : load_tensors(t.file)) loaded.emplace(name, std::move(tensor));
  return loaded;
}

// Builds the model in `dtype` from the start: a 1B model built in fp32 and then cast held twice its size in memory
// and spent most of the import drawing initial weights that the checkpoint then overwrites.
GPT build_in(const ModelConfig& cfg, torch::ScalarType dtype) {
  const auto previous = torch::get_default_dtype();
  torch::set_default_dtype(c10::scalarTypeToTypeMeta(dtype));
  SkipInitialisation no_draws;  // every tensor is overwritten by the checkpoint's (place() checks it)
  try {
    GPT model(cfg);
    torch::set_default_dtype(previous);
    return model;
  } catch (...) {
    torch::set_default_dtype(previous);
    throw;
  }
}

// Copies `x` into its place in `params` (all of it, or its block of rows of a fused tensor); counts what it filled.
void place(const HfTensor& t, const torch::Tensor& x, std::unordered_map<std::string, torch::Tensor>& params,
           std::unordered_map<std::string, int64_t>& filled) {
  auto it = params.find(t.fwlab_name);
  if (it == params.end()) throw std::logic_error(fmt::format("import: the model has no '{}' for '{}'", t.fwlab_name, t.hf_name));
  auto target = t.op == HfOp::rows ? it->second.narrow(0, t.row_offset, x.size(0)) : it->second;
  const auto source = t.op == HfOp::transpose ? x.t() : x;
  TORCH_CHECK(target.sizes() == source.sizes(), "import: '", t.hf_name, "' does not fit '", t.fwlab_name, "'");
  target.copy_(source);
  filled[t.fwlab_name] += x.numel();
}

}  // namespace

HfImport load_hf(const std::string& dir) {
  const auto ck = read_hf_checkpoint(dir);
  auto loaded = load_all(ck);
  torch::ScalarType dtype = torch::kFloat32;  // the embedding's: one dtype for the model
  for (const auto& t : ck.tensors)
    if (t.fwlab_name == "wte.weight" && t.op != HfOp::tied) dtype = loaded.at(t.hf_name).scalar_type();
  HfImport out;
  out.model = build_in(ck.config, dtype);
  std::unordered_map<std::string, torch::Tensor> params;
  for (auto& [name, tensor] : model_tensors(out.model)) params.emplace(name, tensor);
  std::unordered_map<std::string, int64_t> filled;
  std::vector<std::pair<std::string, torch::Tensor>> tied;  // lm_head.weight of a tied model
  torch::NoGradGuard guard;
  for (const auto& t : ck.tensors) {
    nlohmann::json entry = {{"hf", t.hf_name}, {"file", fs::path(t.file).filename().string()}, {"op", to_string(t.op)}};
    if (t.op != HfOp::ignore) {
      auto x = loaded.at(t.hf_name);
      loaded.erase(t.hf_name);  // each file tensor is freed once it is in the model
      if (x.scalar_type() != dtype) {
        entry["cast"] = fmt::format("{} -> {}", c10::toString(x.scalar_type()), c10::toString(dtype));
        x = x.to(dtype);
      }
      if (t.op == HfOp::tied) tied.emplace_back(t.hf_name, x);
      else place(t, x, params, filled);
      entry["to"] = t.fwlab_name;
    }
    out.record.push_back(entry);
  }
  for (const auto& [name, tensor] : params)
    if (filled[name] != tensor.numel()) throw std::logic_error(fmt::format("import: '{}' was not filled from {}", name, dir));
  for (const auto& [name, head] : tied)
    if (!torch::equal(head, params.at("wte.weight")))
      throw FormatError(fmt::format("{}: {} differs from the token embedding (wte.weight): an untied output projection, but "
                                    "config.json ties it (tie_word_embeddings)", dir, name));
  return out;
}

void export_hf(const GPT& model, const std::string& dir) {
  const auto& cfg = model->config();
  const auto names = hf_names(cfg);  // throws ConfigError when no architecture holds the model
  std::unordered_map<std::string, torch::Tensor> params;
  for (auto& [name, t] : model_tensors(model)) params.emplace(name, t);
  NamedTensors out;
  std::set<std::string> exported;
  for (const auto& n : names) {
    if (n.op == HfOp::tied || n.op == HfOp::ignore) continue;
    auto it = params.find(n.fwlab);
    if (it == params.end()) throw std::logic_error(fmt::format("export: the model has no '{}'", n.fwlab));
    auto x = it->second;
    if (n.op == HfOp::rows) x = x.narrow(0, n.row_offset, n.shape.front()).contiguous();
    if (n.op == HfOp::transpose) x = x.t().contiguous();
    out.emplace_back(hf_export_name(cfg, n.hf), x);
    exported.insert(n.fwlab);
  }
  for (const auto& param : params)
    if (!exported.count(param.first)) throw std::logic_error(fmt::format("export: '{}' has no Hugging Face name", param.first));
  fs::create_directories(dir);
  save_tensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), hf_config_json(cfg).dump(2) + "\n");
}

GPT load_source_model(const std::string& source, nlohmann::json* import_record) {
  if (!is_hf_source(source)) return load_model(source);
  auto imported = load_hf(hf_dir(source));
  if (import_record) *import_record = std::move(imported.record);
  return imported.model;
}

}  // namespace fwlab
