#include "contract/hf_gpt2.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

namespace fwlab {

namespace fs = std::filesystem;
using safetensors::FormatError;

namespace {

constexpr const char* kPrefix = "hf:";
constexpr const char* kTransformer = "transformer.";

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(fmt::format("{}: cannot open", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(fmt::format("{}: not valid JSON (byte {}): {}", path.string(), e.byte, e.what()));
  }
}

int64_t int_key(const nlohmann::json& j, const char* key, const std::string& where, bool required = true, int64_t fallback = 0) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw FormatError(fmt::format("{}: key '{}' is missing", where, key));
    return fallback;
  }
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    throw FormatError(fmt::format("{}: key '{}' must be a positive integer, got {}", where, key, j[key].dump()));
  return j[key].get<int64_t>();
}

double number_key(const nlohmann::json& j, const char* key, const std::string& where, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) throw FormatError(fmt::format("{}: key '{}' must be a number, got {}", where, key, j[key].dump()));
  return j[key].get<double>();
}

// Options of Hugging Face's GPT2 that change the computation and that fwlab does not implement: refused by name
// rather than approximated.
void reject_unimplemented(const nlohmann::json& j, const std::string& where) {
  struct Option {
    const char* key;
    bool implemented_value;
    const char* what;
  };
  static const Option kOptions[] = {
      {"scale_attn_by_inverse_layer_idx", false, "scales attention scores by 1 / (layer index + 1)"},
      {"reorder_and_upcast_attn", false, "reorders and upcasts the attention product"},
      {"add_cross_attention", false, "adds encoder-decoder cross-attention"},
      {"scale_attn_weights", true, "leaving attention scores unscaled by 1 / sqrt(head_dim)"},
      {"tie_word_embeddings", true, "an output projection separate from wte"},
  };
  for (const auto& o : kOptions) {
    if (!j.contains(o.key) || j[o.key].is_null()) continue;
    if (!j[o.key].is_boolean()) throw FormatError(fmt::format("{}: key '{}' must be true or false, got {}", where, o.key, j[o.key].dump()));
    if (j[o.key].get<bool>() != o.implemented_value)
      throw FormatError(fmt::format("{}: key '{}' = {} is not implemented by fwlab ({}); refusing rather than approximating",
                                    where, o.key, j[o.key].dump(), o.what));
  }
}

std::string activation_of(const nlohmann::json& j, const std::string& where) {
  const auto v = j.value("activation_function", nlohmann::json("gelu_new"));
  if (!v.is_string()) throw FormatError(fmt::format("{}: key 'activation_function' must be a string, got {}", where, v.dump()));
  const auto name = v.get<std::string>();
  // gelu_new, gelu_pytorch_tanh and gelu_fast are the same tanh approximation written three ways.
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return "gelu_tanh";
  if (name == "gelu") return "gelu";
  throw FormatError(fmt::format("{}: key 'activation_function' = '{}' is not implemented by fwlab "
                                "(gelu_new, gelu_pytorch_tanh, gelu_fast or gelu)", where, name));
}

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// Expected shape of every tensor by its name without prefix.
std::map<std::string, std::vector<int64_t>> expected_shapes(const ModelConfig& c) {
  const int64_t d = c.d_model, ff = c.ff_dim();
  std::map<std::string, std::vector<int64_t>> out = {
      {"wte.weight", {c.vocab, d}}, {"wpe.weight", {c.context, d}}, {"ln_f.weight", {d}}, {"ln_f.bias", {d}}};
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const auto h = fmt::format("h.{}.", i);
    for (const char* ln : {"ln_1", "ln_2"}) {
      out[h + ln + ".weight"] = {d};
      out[h + ln + ".bias"] = {d};
    }
    out[h + "attn.c_attn.weight"] = {d, 3 * d};
    out[h + "attn.c_attn.bias"] = {3 * d};
    out[h + "attn.c_proj.weight"] = {d, d};
    out[h + "attn.c_proj.bias"] = {d};
    out[h + "mlp.c_fc.weight"] = {d, ff};
    out[h + "mlp.c_fc.bias"] = {ff};
    out[h + "mlp.c_proj.weight"] = {ff, d};
    out[h + "mlp.c_proj.bias"] = {d};
  }
  return out;
}

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
        throw FormatError(fmt::format("{}: weight_map['{}'] must be a file name in the directory, got {}", index.string(), name, file.dump()));
      where[name] = file.get<std::string>();
      by_file[file.get<std::string>()].push_back(name);
    }
    for (const auto& [file, names] : by_file) {
      if (!fs::is_regular_file(dir / file))
        throw FormatError(fmt::format("{}: shard '{}' (holding '{}'{}) does not exist", index.string(), file, names.front(),
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
    throw FormatError(fmt::format("{}: only pytorch_model.bin (a pickle) is there; fwlab reads safetensors "
                                  "(model.safetensors or shards with model.safetensors.index.json)", dir.string()));
  throw FormatError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json exists", dir.string()));
}

}  // namespace

bool is_hf_source(const std::string& source) { return source.rfind(kPrefix, 0) == 0; }
std::string hf_dir(const std::string& source) { return source.substr(std::char_traits<char>::length(kPrefix)); }

const char* to_string(HfOp op) {
  switch (op) {
    case HfOp::copy: return "copied";
    case HfOp::transpose: return "transposed (Conv1D [in, out] -> Linear [out, in])";
    case HfOp::tied: return "tied (equal to wte; the output projection is tied)";
    case HfOp::ignore: return "ignored (causal-mask buffer, not a parameter)";
  }
  return "?";
}

ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw FormatError(fmt::format("{}: not a JSON object", where));
  const auto type = j.value("model_type", nlohmann::json("gpt2"));
  std::string archs = j.contains("architectures") ? j["architectures"].dump() : "";
  if (type != "gpt2")
    throw FormatError(fmt::format("{}: key 'model_type' = {}{}: not a GPT-2 checkpoint (fwlab reads the GPT-2 family: gpt2, "
                                  "gpt2-medium/large/xl, distilgpt2)", where, type.dump(), archs.empty() ? "" : " (architectures " + archs + ")"));
  reject_unimplemented(j, where);
  ModelConfig c;
  c.vocab = int_key(j, "vocab_size", where);
  c.d_model = int_key(j, "n_embd", where);
  c.n_heads = int_key(j, "n_head", where);
  c.n_layers = int_key(j, "n_layer", where);
  // n_ctx is the name of older files; n_positions is the size of wpe.
  c.context = int_key(j, "n_positions", where, !j.contains("n_ctx"), j.contains("n_ctx") ? int_key(j, "n_ctx", where) : 0);
  if (c.d_model % c.n_heads != 0)
    throw FormatError(fmt::format("{}: n_embd = {} is not a multiple of n_head = {}", where, c.d_model, c.n_heads));
  c.head_dim = c.d_model / c.n_heads;
  c.d_ff = int_key(j, "n_inner", where, false, 0);  // null: 4 * n_embd
  c.activation = activation_of(j, where);
  c.ln_eps = number_key(j, "layer_norm_epsilon", where, 1e-5);
  // One dropout rate in fwlab: the residual one (GPT-2's three are equal); a job's model.dropout overrides it.
  c.dropout = number_key(j, "resid_pdrop", where, 0.1);
  c.layers.assign(static_cast<size_t>(c.n_layers), MixerSpec{});
  try {
    validate(c);
  } catch (const ConfigError& e) {
    throw FormatError(fmt::format("{}: {}", where, e.what()));
  }
  return c;
}

ModelConfig read_hf_config(const std::string& dir) {
  const auto path = fs::path(dir) / "config.json";
  if (!fs::is_directory(dir)) throw FormatError(fmt::format("{}: not a directory (hf: names a Hugging Face model directory)", dir));
  if (!fs::is_regular_file(path)) throw FormatError(fmt::format("{}: does not exist", path.string()));
  return hf_config_from_json(read_json(path), path.string());
}

HfCheckpoint read_hf_checkpoint(const std::string& dir) {
  HfCheckpoint ck;
  ck.dir = dir;
  ck.config = read_hf_config(dir);
  const auto config_path = (fs::path(dir) / "config.json").string();
  std::vector<fs::path> files;
  const auto index = shard_map(dir, files);
  const auto expected = expected_shapes(ck.config);
  const std::map<std::string, HfName> fwlab_of = [&] {
    std::map<std::string, HfName> m;
    for (const auto& n : hf_names(ck.config)) m[n.hf] = n;
    return m;
  }();
  static const std::regex kMaskBuffer(R"(h\.[0-9]+\.attn\.(bias|masked_bias))");
  std::set<std::string> seen;
  for (const auto& file : files) {
    const auto header = safetensors::read_header(file.string());
    for (const auto& e : header.tensors) {
      if (!index.empty()) {
        auto it = index.find(e.name);
        if (it == index.end() || it->second != file.filename().string())
          throw FormatError(fmt::format("{}: tensor '{}' is not listed for this shard in model.safetensors.index.json", file.string(), e.name));
      }
      HfTensor t{e.name, file.string(), "", HfOp::copy};
      std::string name = e.name.rfind(kTransformer, 0) == 0 ? e.name.substr(std::char_traits<char>::length(kTransformer)) : e.name;
      if (std::regex_match(name, kMaskBuffer)) {
        t.op = HfOp::ignore;
      } else if (name == "lm_head.weight") {
        t.op = HfOp::tied;
        name = "wte.weight";  // checked against wte's shape below, and its values at load
      } else if (!expected.count(name)) {
        throw FormatError(fmt::format("{}: unexpected tensor '{}' (not part of a GPT-2 of config.json's sizes: n_layer = {})",
                                      file.string(), e.name, ck.config.n_layers));
      }
      if (t.op != HfOp::ignore) {
        const auto& want = expected.at(name);
        if (e.shape != want)
          throw FormatError(fmt::format("{}: tensor '{}' has shape {} but {} implies {} (n_embd = {}, n_positions = {}, vocab_size = {})",
                                        file.string(), e.name, shape_str(e.shape), config_path, shape_str(want), ck.config.d_model,
                                        ck.config.context, ck.config.vocab));
        if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16" && e.dtype != "F64")
          throw FormatError(fmt::format("{}: tensor '{}' is stored as {}, not a floating type", file.string(), e.name, e.dtype));
      }
      if (t.op == HfOp::copy) {
        const auto& n = fwlab_of.at(name);
        t.fwlab_name = n.fwlab;
        t.op = n.transposed ? HfOp::transpose : HfOp::copy;
        if (!seen.insert(name).second) throw FormatError(fmt::format("{}: tensor '{}' appears twice in the directory", file.string(), name));
      }
      ck.tensors.push_back(std::move(t));
    }
  }
  for (const auto& [name, shape] : expected)
    if (!seen.count(name))
      throw FormatError(fmt::format("{}: missing tensor '{}' (config.json: n_layer = {}); a missing or incomplete shard?", dir, name,
                                    ck.config.n_layers));
  for (const auto& listed : index) {  // not structured bindings: clang 14 cannot capture those in lambdas
    const auto& name = listed.first;
    if (std::none_of(ck.tensors.begin(), ck.tensors.end(), [&](const HfTensor& t) { return t.hf_name == name; }))
      throw FormatError(fmt::format("{}: tensor '{}' listed in model.safetensors.index.json is not in the shard",
                                    (fs::path(dir) / listed.second).string(), name));
  }
  return ck;
}

std::vector<HfName> hf_names(const ModelConfig& c) {
  std::vector<HfName> out = {{"wte.weight", "wte.weight"}, {"wpe.weight", "wpe.weight"}};
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const auto h = fmt::format("h.{}.", i), b = fmt::format("blocks.{}.", i);
    for (const char* p : {"weight", "bias"}) {
      const std::string s = p;
      out.push_back({h + "ln_1." + s, b + "ln1." + s});
      out.push_back({h + "attn.c_attn." + s, b + "mixer.qkv." + s, s == "weight"});
      out.push_back({h + "attn.c_proj." + s, b + "mixer.o." + s, s == "weight"});
      out.push_back({h + "ln_2." + s, b + "ln2." + s});
      out.push_back({h + "mlp.c_fc." + s, b + "fc." + s, s == "weight"});
      out.push_back({h + "mlp.c_proj." + s, b + "proj." + s, s == "weight"});
    }
  }
  out.push_back({"ln_f.weight", "ln_f.weight"});
  out.push_back({"ln_f.bias", "ln_f.bias"});
  return out;
}

nlohmann::json hf_config_json(const ModelConfig& c) {
  // The keys Hugging Face's GPT2Config writes for the released checkpoints; <|endoftext|> is the last token.
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", c.activation == "gelu" ? "gelu" : "gelu_new"},
          {"vocab_size", c.vocab},
          {"n_positions", c.context},
          {"n_ctx", c.context},
          {"n_embd", c.d_model},
          {"n_head", c.n_heads},
          {"n_layer", c.n_layers},
          {"n_inner", c.d_ff > 0 ? nlohmann::json(c.d_ff) : nlohmann::json(nullptr)},
          {"layer_norm_epsilon", c.ln_eps},
          {"resid_pdrop", c.dropout},
          {"embd_pdrop", c.dropout},
          {"attn_pdrop", c.dropout},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"bos_token_id", c.vocab - 1},
          {"eos_token_id", c.vocab - 1},
          {"use_cache", true}};
}

}  // namespace fwlab
