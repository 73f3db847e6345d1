#include "models/hf_import.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "contract/job/events.h"
#include "models/checkpoint.h"
#include "models/mapped_file.h"

namespace fwlab {

namespace fs = std::filesystem;
using safetensors::FormatError;

namespace {

// Every tensor of the checkpoint by its name in the files, as views of the mapped files (models/mapped_file.h).
std::unordered_map<std::string, torch::Tensor> map_all(const HfCheckpoint& ck) {
  std::unordered_map<std::string, torch::Tensor> mapped;
  std::set<std::string> files;
  for (const auto& t : ck.tensors)
    if (files.insert(t.file).second)
      for (auto& [name, tensor] : map_tensors(t.file)) mapped.emplace(name, std::move(tensor));
  return mapped;
}

// The dtype of the file's token embedding (its first floating tensor when the embedding is tied away).
torch::ScalarType file_dtype(const HfCheckpoint& ck, const std::unordered_map<std::string, torch::Tensor>& mapped) {
  for (const auto& t : ck.tensors)
    if (t.fwlab_name == "wte.weight" && t.op != HfOp::tied) return mapped.at(t.hf_name).scalar_type();
  return torch::kFloat32;
}

// Builds the model in `dtype` from the start, with no initial draws and no page touched (models/mixer.h's
// linear_layer): every tensor is filled or replaced by the checkpoint's (place() checks it).
GPT build_in(const ModelConfig& cfg, torch::ScalarType dtype) {
  const auto previous = torch::get_default_dtype();
  torch::set_default_dtype(c10::scalarTypeToTypeMeta(dtype));
  SkipInitialisation no_draws;
  try {
    GPT model(cfg);
    torch::set_default_dtype(previous);
    return model;
  } catch (...) {
    torch::set_default_dtype(previous);
    throw;
  }
}

// Puts `x` in its place in `params`: a whole tensor in the model's dtype becomes the parameter itself (the file's
// pages, no copy); a cast, a transpose or a block of a fused tensor is copied and its pages released.
void place(const HfTensor& t, const torch::Tensor& x, std::unordered_map<std::string, torch::Tensor>& params,
           std::unordered_map<std::string, int64_t>& filled) {
  auto it = params.find(t.fwlab_name);
  if (it == params.end())
    throw std::logic_error(fmt::format("import: the model has no '{}' for '{}'", t.fwlab_name, t.hf_name));
  auto& param = it->second;
  auto target = t.op == HfOp::rows ? param.narrow(0, t.row_offset, x.size(0)) : param;
  const auto source = t.op == HfOp::transpose ? x.t() : x;
  TORCH_CHECK(target.sizes() == source.sizes(), "import: '", t.hf_name, "' does not fit '", t.fwlab_name, "'");
  if (t.op == HfOp::copy && x.scalar_type() == param.scalar_type()) {
    param.set_data(x);  // the parameter is the mapped tensor (copy-on-write: training writes stay in this process)
  } else {
    target.copy_(source);
    release_pages(x);
  }
  filled[t.fwlab_name] += x.numel();
}

}  // namespace

torch::ScalarType compute_dtype(const std::string& choice, torch::ScalarType file) {
  if (choice == "file") return file;
  if (choice == "bfloat16") return torch::kBFloat16;
  if (choice == "float16") return torch::kFloat16;
  if (choice == "float32") return torch::kFloat32;
  throw std::invalid_argument(fmt::format("model.dtype: '{}' is not one of float32, bfloat16, float16, file", choice));
}

HfImport load_hf(const std::string& dir, const std::string& dtype_choice) {
  const auto ck = read_hf_checkpoint(dir);
  auto mapped = map_all(ck);
  const auto dtype = compute_dtype(dtype_choice, file_dtype(ck, mapped));
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
      auto x = mapped.at(t.hf_name);
      mapped.erase(t.hf_name);
      if (x.scalar_type() != dtype)
        entry["cast"] = fmt::format("{} -> {}", c10::toString(x.scalar_type()), c10::toString(dtype));
      if (t.op == HfOp::tied)
        tied.emplace_back(t.hf_name, x);
      else
        place(t, x, params, filled);
      entry["to"] = t.fwlab_name;
    }
    out.record.push_back(entry);
  }
  for (const auto& [name, tensor] : params)
    if (filled[name] != tensor.numel())
      throw std::logic_error(fmt::format("import: '{}' was not filled from {}", name, dir));
  for (const auto& [name, head] : tied)
    if (!torch::equal(head.to(dtype), params.at("wte.weight")))
      throw FormatError(
          fmt::format("{}: {} differs from the token embedding (wte.weight): an untied output projection, but "
                      "config.json ties it (tie_word_embeddings)",
                      dir, name));
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
    if (!exported.count(param.first))
      throw std::logic_error(fmt::format("export: '{}' has no Hugging Face name", param.first));
  fs::create_directories(dir);
  save_tensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), hf_config_json(cfg).dump(2) + "\n");
}

GPT load_source_model(const std::string& source, nlohmann::json* import_record, const std::string& dtype_choice) {
  if (!is_hf_source(source)) {
    auto model = load_model(source);
    const auto dtype = compute_dtype(dtype_choice, model->wte->weight.scalar_type());
    if (model->wte->weight.scalar_type() != dtype) model->to(dtype);
    return model;
  }
  auto imported = load_hf(hf_dir(source), dtype_choice);
  if (import_record) *import_record = std::move(imported.record);
  return imported.model;
}

}  // namespace fwlab
