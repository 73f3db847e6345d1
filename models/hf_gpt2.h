// Hugging Face GPT-2 checkpoints in and out of fwlab models (the torch half of contract/hf_gpt2.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "contract/hf_gpt2.h"
#include "models/gpt.h"

namespace fwlab {

struct HfImport {
  GPT model{nullptr};
  // One entry per tensor of the directory: {hf, file, to, op} — where it went and how (HfOp).
  nlohmann::json record = nlohmann::json::array();
};

// Loads DIR into a softmax GPT of config.json's sizes, in the files' floating dtype, on the CPU. Tied lm_head
// tensors must equal wte; every error names the file and tensor (safetensors::FormatError).
HfImport load_hf_gpt2(const std::string& dir);

// Writes config.json + model.safetensors (Hugging Face's GPT2LMHeadModel names, Conv1D orientation, output tied
// to wte). Every layer must be softmax: nothing else has a Hugging Face GPT-2 form (throws ConfigError).
void export_hf_gpt2(const GPT& model, const std::string& dir);

// An fwlab checkpoint file or "hf:DIR"; `import_record` (optional) receives the import's record for hf: sources.
GPT load_source_model(const std::string& source, nlohmann::json* import_record = nullptr);

}  // namespace fwlab
