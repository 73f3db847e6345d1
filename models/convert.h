// Swap-then-finetune (T2R; Mao 2022): build a model with a new mixer plan from a trained one, copying every
// tensor the two share and initialising the rest as the papers do.
#pragma once

#include <string>
#include <vector>

#include "models/gpt.h"

namespace fwlab {

struct ConversionReport {
  std::vector<std::string> copied;    // taken bit-for-bit from the source
  std::vector<std::string> created;   // new, initialised as the target mixer's papers do
  std::vector<std::string> rescaled;  // copied, then rescaled (which rows and why)
  std::string to_string() const;
};

struct Conversion {
  GPT model;
  ConversionReport report;
};

class FastWeight;

// Every tensor of `target` whose name and shape `source` has is copied from it; the rest are reported as created.
void copy_shared_tensors(const torch::nn::Module& source, torch::nn::Module& target, ConversionReport& report);
// A swapped-in fast-weight layer whose value projection was copied is rescaled as its rule asks (Mao 2022);
// `prefix` names its qkv tensors ("blocks.3.mixer.qkv.") in the report.
void rescale_copied_values(FastWeight& layer, const std::string& prefix, ConversionReport& report);

// `target` must have the source's sizes (vocab, d_model, heads, ...); only the mixers may differ. The new
// model is created on the source's device and dtype; `seed` drives the initialisation of new tensors.
Conversion convert_model(const GPT& source, const ModelConfig& target, uint64_t seed);

// A plain model (lora_rank 0) whose projections hold W + (alpha / r) B A (models/lora.h): the same outputs,
// no adapters, a checkpoint any fwlab (or, for softmax models, the Hugging Face exporter) reads.
GPT merge_lora(const GPT& model);

// T2R inference folding of every relu / identity feature map (eq. 8); returns the layers folded.
std::vector<size_t> fold_feature_maps(GPT& model);

}  // namespace fwlab
