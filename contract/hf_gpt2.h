// Hugging Face GPT-2 checkpoints (gpt2, gpt2-medium/large/xl, distilgpt2): a directory with config.json and
// model.safetensors, or shards listed by model.safetensors.index.json. This half is torch-free: it reads
// config.json into a ModelConfig and maps every tensor of the directory to the fwlab parameter it becomes,
// checking names, shapes and shards against config.json, so that the harness can report a bad directory
// before any job starts and the worker loads exactly what was checked. Errors are safetensors::FormatError
// naming the file and the key or tensor at fault.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/model_config.h"
#include "contract/safetensors_header.h"

namespace fwlab {

// `init_checkpoint = "hf:DIR"` names a Hugging Face directory; anything else is an fwlab checkpoint file.
bool is_hf_source(const std::string& source);
std::string hf_dir(const std::string& source);  // DIR of "hf:DIR"

// What happens to one tensor of the directory on import.
enum class HfOp {
  copy,       // same layout in both
  transpose,  // GPT-2's Conv1D stores [in, out]; fwlab's Linear holds [out, in]
  tied,       // lm_head.weight: must equal wte (the output projection is tied), not stored twice
  ignore,     // attn.bias / attn.masked_bias: the causal-mask buffers of older files, not parameters
};
const char* to_string(HfOp op);

struct HfTensor {
  std::string hf_name;     // as the file names it
  std::string file;        // the shard holding it
  std::string fwlab_name;  // "" for tied and ignored tensors
  HfOp op = HfOp::copy;
};

struct HfCheckpoint {
  std::string dir;
  ModelConfig config;  // every layer softmax
  std::vector<HfTensor> tensors;
};

// config.json alone (the planner needs the model's sizes, not its weights).
ModelConfig read_hf_config(const std::string& dir);
ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where);
// config.json and every shard's header, checked against each other.
HfCheckpoint read_hf_checkpoint(const std::string& dir);

// The fwlab parameter <-> Hugging Face tensor table of one model (names without the "transformer." prefix),
// and the config.json that describes a model of `cfg` (every layer softmax; checked by the exporter).
struct HfName {
  std::string hf, fwlab;
  bool transposed = false;
};
std::vector<HfName> hf_names(const ModelConfig& cfg);
nlohmann::json hf_config_json(const ModelConfig& cfg);

}  // namespace fwlab
