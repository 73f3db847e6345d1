// Hugging Face checkpoint directories: config.json and model.safetensors, or shards listed by
// model.safetensors.index.json. This half is torch-free: it reads config.json into a ModelConfig through the
// architecture family that config.json names (contract/formats/hf/family.h) and maps every tensor of the directory to
// the fwlab parameter it becomes, checking names, shapes and shards against config.json, so that the harness can report
// a bad directory before any job starts and the worker loads exactly what was checked. Errors are
// safetensors::FormatError naming the file and the key or tensor at fault.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/model/model_config.h"
#include "contract/formats/safetensors_header.h"

namespace fwlab {

// `init_checkpoint = "hf:DIR"` names a Hugging Face directory; anything else is an fwlab checkpoint file.
bool is_hf_source(const std::string& source);
std::string hf_dir(const std::string& source);  // DIR of "hf:DIR"

// What happens to one tensor of the directory on import.
enum class HfOp {
  copy,       // same layout in both
  transpose,  // GPT-2's Conv1D stores [in, out]; fwlab's Linear holds [out, in]
  rows,       // a block of rows of a fused fwlab tensor (Llama's q/k/v_proj into qkv; gate/up_proj into fc)
  tied,       // lm_head.weight of a tied model: must equal the token embedding, not stored twice
  ignore,     // attn.bias / attn.masked_bias: the causal-mask buffers of older GPT-2 files, not parameters
};
const char* to_string(HfOp op);

// One tensor of an architecture's table: its Hugging Face name (without a prefix the family strips), the fwlab
// parameter it becomes and how.
struct HfName {
  std::string hf, fwlab;
  std::vector<int64_t> shape;  // as Hugging Face stores it
  HfOp op = HfOp::copy;
  int64_t row_offset = 0;  // HfOp::rows: the first row of the fwlab tensor it fills
  bool optional = false;   // may be absent (a tied lm_head.weight)
};

struct HfTensor {
  std::string hf_name;     // as the file names it
  std::string file;        // the shard holding it
  std::string fwlab_name;  // "" for ignored tensors; the token embedding for tied ones
  HfOp op = HfOp::copy;
  int64_t row_offset = 0;
};

struct HfCheckpoint {
  std::string dir;
  std::string family;  // gpt2 | llama (contract/formats/hf/family.h)
  ModelConfig config;  // every layer softmax
  std::vector<HfTensor> tensors;
};

// config.json alone (the planner needs the model's sizes, not its weights).
ModelConfig read_hf_config(const std::string& dir);
ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where);
// config.json and every shard's header, checked against each other.
HfCheckpoint read_hf_checkpoint(const std::string& dir);

// The table of `cfg`'s architecture and the config.json describing it; throws ConfigError naming the field when
// no Hugging Face architecture holds the model (a recurrent mixer, a block no family has).
std::vector<HfName> hf_names(const ModelConfig& cfg);
nlohmann::json hf_config_json(const ModelConfig& cfg);
// The name a tensor of `cfg` is exported under (GPT-2 files prefix "transformer.").
std::string hf_export_name(const ModelConfig& cfg, const std::string& name);

}  // namespace fwlab
