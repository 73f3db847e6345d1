#include "contract/job/model_dtype.h"

#include <fmt/format.h>

#include "contract/model/model_config.h"

namespace fwlab {

std::string take_model_dtype(nlohmann::json& model, const std::string& kind, bool has_checkpoint) {
  if (!model.is_object() || !model.contains("dtype")) return kDefaultModelDtype;
  const auto value = model["dtype"];
  model.erase("dtype");
  if (!value.is_string()) throw ConfigError("model.dtype", fmt::format("must be a string, got {}", value.dump()));
  const auto dtype = value.get<std::string>();
  if (dtype != "float32" && dtype != "bfloat16" && dtype != "float16" && dtype != "file")
    throw ConfigError("model.dtype", fmt::format("'{}' is not one of float32, bfloat16, float16, file", dtype));
  const bool trains = kind == "train" || kind == "transfer" || kind == "translate";
  if (trains && dtype != "float32")
    throw ConfigError(
        "model.dtype",
        fmt::format("kind '{}' trains float32 weights ('{}' would let the optimizer lose updates smaller than "
                    "a 16-bit weight's spacing): use train.precision = \"bf16\" to compute in bfloat16",
                    kind, dtype));
  if (dtype == "file" && !has_checkpoint)
    throw ConfigError("model.dtype",
                      "'file' is the checkpoint's dtype, and this job starts from no checkpoint (init_checkpoint)");
  return dtype;
}

nlohmann::json architecture_keys(const nlohmann::json& model) {
  if (!model.is_object() || !model.contains("dtype")) return model;
  auto keys = model;
  keys.erase("dtype");
  return keys;
}

}  // namespace fwlab
