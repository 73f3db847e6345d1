// Model checkpoints as safetensors, with the model configuration in __metadata__ so that a file alone rebuilds
// its model. Writes are atomic (temp file + rename): a crash never leaves a half-written checkpoint behind.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/gpt.h"
#include "contract/safetensors_header.h"

namespace fwlab {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;


void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata = {});
// Loads every tensor to the CPU; `header` (optional) receives the parsed header with the metadata.
NamedTensors load_tensors(const std::string& path, safetensors::Header* header = nullptr);

// Parameters and buffers of the model, in registration order.
NamedTensors model_tensors(const GPT& model);
void save_model(const std::string& path, const GPT& model, std::map<std::string, std::string> metadata = {});
// Rebuilds the model from the file's configuration and loads its weights (CPU, the file's dtype).
GPT load_model(const std::string& path);
// Copies `tensors` into `model`: every parameter and buffer must be present with the same shape and no tensor
// may be left over; errors name the tensor. `source` names the file in messages.
void load_into(GPT& model, const NamedTensors& tensors, const std::string& source);

}  // namespace fwlab
