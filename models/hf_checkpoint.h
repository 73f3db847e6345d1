// Hugging Face checkpoints in and out of fwlab models (the torch half of contract/hf_checkpoint.h): GPT-2 and the
// Llama family (Llama, Mistral, Qwen2).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "contract/hf_checkpoint.h"
#include "models/gpt.h"

namespace fwlab {

struct HfImport {
  GPT model{nullptr};
  // One entry per tensor of the directory: {hf, file, to, op} — where it went and how (HfOp).
  nlohmann::json record = nlohmann::json::array();
};

// Loads DIR into a softmax model of config.json's architecture and sizes, in the dtype of its token embedding (the
// others cast to it, and the record says so), on the CPU. A tied lm_head.weight must equal the embedding; every
// error names the file and tensor (safetensors::FormatError).
HfImport load_hf(const std::string& dir);

// Writes config.json + model.safetensors in the layout of the model's Hugging Face architecture, every tensor
// bit for bit. Throws ConfigError naming the field when no architecture holds the model (a recurrent mixer, LoRA
// adapters not merged, a block no family has).
void export_hf(const GPT& model, const std::string& dir);

// An fwlab checkpoint file or "hf:DIR"; `import_record` (optional) receives the import's record for hf: sources.
GPT load_source_model(const std::string& source, nlohmann::json* import_record = nullptr);

}  // namespace fwlab
