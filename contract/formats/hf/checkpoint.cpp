#include "contract/formats/hf/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "contract/formats/hf/family.h"

namespace fwlab {

namespace fs = std::filesystem;
using safetensors::FormatError;

namespace {

constexpr const char* kPrefix = "hf:";

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(fmt::format("{}: cannot open", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(fmt::format("{}: not valid JSON (byte {}): {}", path.string(), e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number too large for a double (out_of_range 406)
    throw FormatError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
}

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The shard files and, for a sharded checkpoint, which tensor the index puts in which file.
std::map<std::string, std::string> shard_map(const fs::path& dir, std::vector<fs::path>& files) {
  std::map<std::string, std::string> where;  // tensor -> file name (sharded only)
  const auto index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const auto j = read_json(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw FormatError(fmt::format("{}: key 'weight_map' is missing or not an object", index.string()));
    std::map<std::string, std::vector<std::string>> by_file;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        throw FormatError(fmt::format("{}: weight_map['{}'] must be a file name in the directory, got {}",
                                      index.string(), name, file.dump()));
      where[name] = file.get<std::string>();
      by_file[file.get<std::string>()].push_back(name);
    }
    for (const auto& [file, names] : by_file) {
      if (!fs::is_regular_file(dir / file))
        throw FormatError(fmt::format("{}: shard '{}' (holding '{}'{}) does not exist", index.string(), file,
                                      names.front(),
                                      names.size() > 1 ? fmt::format(" and {} more", names.size() - 1) : ""));
      files.push_back(dir / file);
    }
    return where;
  }
  if (fs::is_regular_file(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
    return where;
  }
  if (fs::exists(dir / "pytorch_model.bin"))
    throw FormatError(
        fmt::format("{}: only pytorch_model.bin (a pickle) is there; fwlab reads safetensors "
                    "(model.safetensors or shards with model.safetensors.index.json)",
                    dir.string()));
  throw FormatError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json exists", dir.string()));
}

const HfFamily& family_of_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw FormatError(fmt::format("{}: not a JSON object", where));
  const auto type = j.value("model_type", nlohmann::json("gpt2"));  // GPT-2's oldest files have none
  std::string archs = j.contains("architectures") ? j["architectures"].dump() : "";
  const auto* family = type.is_string() ? hf_family_for_type(type.get<std::string>()) : nullptr;
  if (!family) {
    std::vector<std::string> known;
    for (const auto* f : hf_families()) known.insert(known.end(), f->model_types.begin(), f->model_types.end());
    throw FormatError(fmt::format("{}: key 'model_type' = {}{}: not an architecture fwlab reads ({})", where,
                                  type.dump(), archs.empty() ? "" : " (architectures " + archs + ")",
                                  fmt::join(known, ", ")));
  }
  if (j.contains(
          "architectures")) {  // another head on the same body (a classifier, a bare model) is not a language model
    if (!j["architectures"].is_array())
      throw FormatError(fmt::format("{}: key 'architectures' must be a list, got {}", where, archs));
    for (const auto& a : j["architectures"])
      if (!a.is_string() || std::find(family->architectures.begin(), family->architectures.end(),
                                      a.get<std::string>()) == family->architectures.end())
        throw FormatError(fmt::format("{}: key 'architectures' holds {}: fwlab reads {} for model_type {}", where,
                                      a.dump(), fmt::join(family->architectures, ", "), type.dump()));
  }
  return *family;
}

std::string without_prefix(const HfFamily& family, const std::string& name) {
  const auto& prefix = family.tensor_prefix;
  return !prefix.empty() && name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// The directory's tensor `e` checked against the family's table.
HfTensor check_tensor(const HfFamily& family, const std::map<std::string, HfName>& table, const HfCheckpoint& ck,
                      const safetensors::TensorEntry& e, const fs::path& file) {
  HfTensor t{e.name, file.string(), "", HfOp::copy, 0};
  const auto name = without_prefix(family, e.name);
  if (family.ignored(name)) {
    t.op = HfOp::ignore;
    return t;
  }
  auto it = table.find(name);
  if (it == table.end())
    throw FormatError(fmt::format("{}: unexpected tensor '{}' (not part of a {} of config.json's sizes: {})",
                                  file.string(), e.name, family.name, family.size_keys(ck.config)));
  const auto& n = it->second;
  if (e.shape != n.shape)
    throw FormatError(fmt::format("{}: tensor '{}' has shape {} but {} implies {} ({})", file.string(), e.name,
                                  shape_str(e.shape), (fs::path(ck.dir) / "config.json").string(), shape_str(n.shape),
                                  family.size_keys(ck.config)));
  if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16" && e.dtype != "F64")
    throw FormatError(fmt::format("{}: tensor '{}' is stored as {}, not a floating type (F32, BF16, F16, F64)",
                                  file.string(), e.name, e.dtype));
  t.fwlab_name = n.fwlab, t.op = n.op, t.row_offset = n.row_offset;
  return t;
}

// Every tensor the table requires is there, and every tensor the index lists is in its shard.
void check_complete(const HfCheckpoint& ck, const std::vector<HfName>& names, const std::set<std::string>& seen,
                    const std::map<std::string, std::string>& index, const std::string& sizes) {
  for (const auto& n : names)
    if (!n.optional && !seen.count(n.hf))
      throw FormatError(fmt::format("{}: missing tensor '{}' (config.json: {}); a missing or incomplete shard?", ck.dir,
                                    n.hf, sizes));
  for (const auto& listed : index) {  // not structured bindings: clang 14 cannot capture those in lambdas
    const auto& name = listed.first;
    if (std::none_of(ck.tensors.begin(), ck.tensors.end(), [&](const HfTensor& t) { return t.hf_name == name; }))
      throw FormatError(fmt::format("{}: tensor '{}' listed in model.safetensors.index.json is not in the shard",
                                    (fs::path(ck.dir) / listed.second).string(), name));
  }
}

}  // namespace

bool is_hf_source(const std::string& source) { return source.rfind(kPrefix, 0) == 0; }
std::string hf_dir(const std::string& source) { return source.substr(std::char_traits<char>::length(kPrefix)); }

const char* to_string(HfOp op) {
  switch (op) {
    case HfOp::copy:
      return "copied";
    case HfOp::transpose:
      return "transposed (Conv1D [in, out] -> Linear [out, in])";
    case HfOp::rows:
      return "copied into rows of a fused tensor";
    case HfOp::tied:
      return "tied (equal to the token embedding; the output projection is tied)";
    case HfOp::ignore:
      return "ignored (causal-mask buffer, not a parameter)";
  }
  return "?";
}

ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where) {
  return family_of_json(j, where).config_from_json(j, where);
}

namespace {

// DIR/config.json, checked to be there.
nlohmann::json config_json_of(const std::string& dir) {
  const auto path = fs::path(dir) / "config.json";
  if (!fs::is_directory(dir))
    throw FormatError(fmt::format("{}: not a directory (hf: names a Hugging Face model directory)", dir));
  if (!fs::is_regular_file(path)) throw FormatError(fmt::format("{}: does not exist", path.string()));
  return read_json(path);
}

}  // namespace

ModelConfig read_hf_config(const std::string& dir) {
  return hf_config_from_json(config_json_of(dir), (fs::path(dir) / "config.json").string());
}

HfCheckpoint read_hf_checkpoint(const std::string& dir) {
  HfCheckpoint ck;
  ck.dir = dir;
  const auto json = config_json_of(dir);  // read once: the family and the configuration both come from it
  const auto where = (fs::path(dir) / "config.json").string();
  const auto& family = family_of_json(json, where);
  ck.config = family.config_from_json(json, where);
  ck.family = family.name;
  std::vector<fs::path> files;
  const auto index = shard_map(dir, files);
  const auto names = family.names(ck.config);
  std::map<std::string, HfName> table;
  for (const auto& n : names) table[n.hf] = n;
  std::set<std::string> seen;
  for (const auto& file : files) {
    for (const auto& e : safetensors::read_header(file.string()).tensors) {
      if (!index.empty()) {
        auto it = index.find(e.name);
        if (it == index.end() || it->second != file.filename().string())
          throw FormatError(fmt::format("{}: tensor '{}' is not listed for this shard in model.safetensors.index.json",
                                        file.string(), e.name));
      }
      auto t = check_tensor(family, table, ck, e, file);
      if (t.op != HfOp::ignore && !seen.insert(without_prefix(family, e.name)).second)
        throw FormatError(fmt::format("{}: tensor '{}' appears twice in the directory", file.string(),
                                      without_prefix(family, e.name)));
      ck.tensors.push_back(std::move(t));
    }
  }
  check_complete(ck, names, seen, index, family.size_keys(ck.config));
  return ck;
}

std::vector<HfName> hf_names(const ModelConfig& cfg) { return hf_family_for(cfg).names(cfg); }
nlohmann::json hf_config_json(const ModelConfig& cfg) { return hf_family_for(cfg).config_json(cfg); }
std::string hf_export_name(const ModelConfig& cfg, const std::string& name) {
  return hf_family_for(cfg).tensor_prefix + name;
}

}  // namespace fwlab
