#include "models/checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <fmt/ranges.h>

#include <cstdio>
#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace fwlab {

namespace {

const std::vector<std::pair<std::string, torch::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> table = {
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
      {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},   {"I8", torch::kInt8},
      {"U8", torch::kUInt8},    {"BOOL", torch::kBool}};
  return table;
}

std::string dtype_name(torch::ScalarType t) {
  for (const auto& [name, type] : dtype_table())
    if (type == t) return name;
  throw std::runtime_error(fmt::format("safetensors: cannot store dtype {}", c10::toString(t)));
}

std::string shape_str(c10::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata) {
  std::vector<safetensors::TensorEntry> entries;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    safetensors::TensorEntry e;
    e.name = name;
    e.dtype = dtype_name(t.scalar_type());
    e.shape.assign(t.sizes().begin(), t.sizes().end());
    e.begin = offset;
    offset += static_cast<uint64_t>(t.nbytes());
    e.end = offset;
    entries.push_back(std::move(e));
    data.push_back(std::move(t));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot open for writing", tmp));
    auto header = safetensors::encode_header(entries, metadata);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& t : data)
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(fmt::format("{}: cannot rename into place", path));
}

torch::ScalarType scalar_type(const std::string& name) {
  for (const auto& [n, type] : dtype_table())
    if (n == name) return type;
  throw safetensors::FormatError(fmt::format("unknown dtype '{}'", name));
}

void check_finite(const torch::Tensor& t, const std::string& path, const std::string& name) {
  // A damaged file is not a result: non-finite weights would otherwise be recorded as a divergence at step 0.
  // max and min propagate NaN and show an infinity, at 1/60 of isfinite's cost (30 ms against 1.8 s per 100M);
  // aminmax takes both in one pass (a 1B model's load spends 0.4 s here instead of 0.8).
  // (libtorch 1.13 has no CPU aminmax for float16: max and min there.)
  if (!t.is_floating_point() || t.numel() == 0) return;
  auto [low, high] = t.scalar_type() == torch::kHalf ? std::make_tuple(t.min(), t.max()) : torch::aminmax(t);
  if (!(std::isfinite(low.item<double>()) && std::isfinite(high.item<double>())))
    throw safetensors::FormatError(
        fmt::format("{}: tensor '{}' holds NaN or infinite values (damaged checkpoint?)", path, name));
}

NamedTensors load_tensors(const std::string& path, safetensors::Header* header_out) {
  auto header = safetensors::read_header(path);
  std::ifstream in(path, std::ios::binary);
  NamedTensors out;
  for (const auto& e : header.tensors) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(scalar_type(e.dtype)));
    in.seekg(static_cast<std::streamoff>(header.data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in)
      throw safetensors::FormatError(fmt::format("{}: tensor '{}': could not read bytes [{}, {}) of the data section",
                                                 path, e.name, e.begin, e.end));
    check_finite(t, path, e.name);
    out.emplace_back(e.name, std::move(t));
  }
  if (header_out) *header_out = std::move(header);
  return out;
}

NamedTensors module_tensors(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

NamedTensors model_tensors(const GPT& model) { return module_tensors(*model); }

void save_module(const std::string& path, const torch::nn::Module& model, const ModelConfig& cfg,
                 std::map<std::string, std::string> metadata) {
  metadata[kModelConfigKey] = to_json(cfg).dump();
  metadata["format"] = "pt";
  save_tensors(path, module_tensors(model), metadata);
}

void save_model(const std::string& path, const GPT& model, std::map<std::string, std::string> metadata) {
  save_module(path, *model, model->config(), std::move(metadata));
}

void load_into(GPT& model, const NamedTensors& tensors, const std::string& source) {
  load_into(*model, tensors, source);
}

void load_into(torch::nn::Module& model, const NamedTensors& tensors, const std::string& source) {
  std::unordered_map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  torch::NoGradGuard guard;
  size_t used = 0;
  for (auto& [name, target] : module_tensors(model)) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw safetensors::FormatError(fmt::format("{}: missing tensor '{}'", source, name));
    const auto& t = *it->second;
    if (t.sizes() != target.sizes())
      throw safetensors::FormatError(fmt::format("{}: tensor '{}' has shape {} but the model expects {}", source, name,
                                                 shape_str(t.sizes()), shape_str(target.sizes())));
    if (t.scalar_type() != target.scalar_type())
      throw safetensors::FormatError(
          fmt::format("{}: tensor '{}' is stored as {} but the model holds {} (header and data disagree?)", source,
                      name, dtype_name(t.scalar_type()), dtype_name(target.scalar_type())));
    target.copy_(t);
    ++used;
  }
  if (used != tensors.size()) {
    auto expected = module_tensors(model);
    for (const auto& [name, t] : tensors) {
      bool known = std::any_of(expected.begin(), expected.end(), [&](const auto& e) { return e.first == name; });
      if (!known)
        throw safetensors::FormatError(fmt::format("{}: unexpected tensor '{}' (not part of the model)", source, name));
    }
  }
}

ModelConfig checkpoint_model_config(const std::string& path, const safetensors::Header& header) {
  auto it = header.metadata.find(kModelConfigKey);
  if (it == header.metadata.end())
    throw safetensors::FormatError(
        fmt::format("{}: no '{}' in __metadata__: not an fwlab model checkpoint", path, kModelConfigKey));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {  // parse errors and number overflows
    throw safetensors::FormatError(
        fmt::format("{}: __metadata__.{} is not valid JSON: {}", path, kModelConfigKey, e.what()));
  }
  try {
    return model_config_from_json(j);
  } catch (const ConfigError& e) {
    throw safetensors::FormatError(fmt::format("{}: model configuration: {}", path, e.what()));
  }
}

void load_module(torch::nn::Module& model, const NamedTensors& tensors, const std::string& path) {
  // The model takes the file's floating dtype, the one most of its tensors hold: a tensor whose header declares
  // another dtype is then reported by name (load_into) rather than converting the whole model to it.
  std::map<torch::ScalarType, size_t> floating;
  for (const auto& [name, t] : tensors)
    if (t.is_floating_point()) ++floating[t.scalar_type()];
  if (!floating.empty())
    model.to(std::max_element(floating.begin(), floating.end(), [](const auto& a, const auto& b) {
               return a.second < b.second;
             })->first);
  load_into(model, tensors, path);
}

GPT load_model(const std::string& path) {
  safetensors::Header header;
  auto tensors = load_tensors(path, &header);
  const auto cfg = checkpoint_model_config(path, header);
  if (cfg.encoder_decoder())
    throw safetensors::FormatError(
        fmt::format("{}: an encoder-decoder checkpoint: a translation job reads it, not a language-model job", path));
  GPT model(cfg);
  load_module(*model, tensors, path);
  return model;
}

}  // namespace fwlab
