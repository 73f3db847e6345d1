// Model checkpoints as safetensors, with the model configuration in __metadata__ so that a file alone rebuilds
// its model. Writes are atomic (temp file + rename): a crash never leaves a half-written checkpoint behind.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/gpt.h"
#include "contract/formats/safetensors_header.h"

namespace fwlab {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata = {});
// Loads every tensor to the CPU; `header` (optional) receives the parsed header with the metadata.
NamedTensors load_tensors(const std::string& path, safetensors::Header* header = nullptr);
// The torch dtype of a safetensors dtype name (F32, BF16, ...); FormatError for one it does not know.
torch::ScalarType scalar_type(const std::string& safetensors_dtype);
// FormatError naming the file and tensor when a floating tensor holds NaN or an infinity.
void check_finite(const torch::Tensor& t, const std::string& path, const std::string& name);

// Parameters and buffers of the model, in registration order.
NamedTensors module_tensors(const torch::nn::Module& model);
NamedTensors model_tensors(const GPT& model);
// Any fwlab model (GPT, Seq2Seq) with its configuration in the metadata.
void save_module(const std::string& path, const torch::nn::Module& model, const ModelConfig& cfg,
                 std::map<std::string, std::string> metadata = {});
void save_model(const std::string& path, const GPT& model, std::map<std::string, std::string> metadata = {});
// Rebuilds the model from the file's configuration and loads its weights (CPU, the file's dtype).
GPT load_model(const std::string& path);
// Copies `tensors` into `model`: every parameter and buffer must be present with the same shape and no tensor
// may be left over; errors name the tensor. `source` names the file in messages.
void load_into(GPT& model, const NamedTensors& tensors, const std::string& source);
void load_into(torch::nn::Module& model, const NamedTensors& tensors, const std::string& source);
// The model configuration in a checkpoint's metadata; FormatError naming the file when it is missing or invalid.
ModelConfig checkpoint_model_config(const std::string& path, const safetensors::Header& header);
// `tensors` (of the file `path`) into `model`, which first takes the file's floating dtype.
void load_module(torch::nn::Module& model, const NamedTensors& tensors, const std::string& path);

}  // namespace fwlab
