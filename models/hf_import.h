// Hugging Face checkpoints in and out of fwlab models (the torch half of contract/formats/hf/checkpoint.h): GPT-2 and
// the Llama family (Llama, Mistral, Qwen2).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "contract/formats/hf/checkpoint.h"
#include "models/gpt.h"

namespace fwlab {

struct HfImport {
  GPT model{nullptr};
  // One entry per tensor of the directory: {hf, file, to, op} — where it went and how (HfOp).
  nlohmann::json record = nlohmann::json::array();
};

// The dtype a model computes in for model.dtype `choice` (contract/job/model_dtype.h): float32, bfloat16, float16, or
// "file": `file`, the checkpoint's own.
torch::ScalarType compute_dtype(const std::string& choice, torch::ScalarType file);

// Loads DIR into a softmax model of config.json's architecture and sizes, computing in compute_dtype(dtype_choice,
// the token embedding's dtype) (tensors of another dtype are cast, and the record says so), on the CPU. The files
// are mapped, and a tensor already in that dtype and layout is used where it lies (models/mapped_file.h). A tied
// lm_head.weight must equal the embedding; every error names the file and tensor (safetensors::FormatError).
HfImport load_hf(const std::string& dir, const std::string& dtype_choice = "float32");

// Writes config.json + model.safetensors in the layout of the model's Hugging Face architecture, every tensor
// bit for bit. Throws ConfigError naming the field when no architecture holds the model (a recurrent mixer, LoRA
// adapters not merged, a block no family has).
void export_hf(const GPT& model, const std::string& dir);

// An fwlab checkpoint file or "hf:DIR", computing in compute_dtype(dtype_choice, the file's); `import_record`
// (optional) receives the import's record for hf: sources.
GPT load_source_model(const std::string& source, nlohmann::json* import_record = nullptr,
                      const std::string& dtype_choice = "float32");

}  // namespace fwlab
