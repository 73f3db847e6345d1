// model.dtype, the job key that says in which dtype a job's model computes (a decision of the job's, not of the
// file it loads): float32 (the default, as Hugging Face's from_pretrained), bfloat16, float16, or "file" (the
// checkpoint's own, its token embedding's). It sits among the model keys because users write it there; the
// architecture (contract/model/model_config.h) never reads it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fwlab {

inline constexpr const char* kDefaultModelDtype = "float32";

// Takes `dtype` out of a job's model keys and checks it against the job: a training kind keeps float32 weights
// (an optimizer's update smaller than a 16-bit weight's spacing would be lost; train.precision computes in 16 bits
// over float32 master weights), and "file" needs a checkpoint to read. Throws ConfigError("model.dtype", ...).
std::string take_model_dtype(nlohmann::json& model, const std::string& kind, bool has_checkpoint);

// A job's model keys without dtype: what the model configuration reads.
nlohmann::json architecture_keys(const nlohmann::json& model);

}  // namespace fwlab
