// The safetensors reader (checkpoint headers) and the model configuration a checkpoint carries.
#include <nlohmann/json.hpp>

#include "contract/model/model_config.h"
#include "contract/formats/safetensors_header.h"
#include "tests/fuzz/fuzz_target.h"

using namespace fwlab;

FWLAB_FUZZ_TARGET(safetensors) {
  const auto path = fuzz::scratch_file("model.safetensors", data, size);
  safetensors::Header header;
  try {
    header = safetensors::read_header(path);
  } catch (const safetensors::FormatError&) {
    return 0;
  }
  // What the reader accepted is consistent: inside the file, sized by dtype and shape, not overlapping.
  uint64_t last_end = 0;
  for (const auto& t : header.tensors) {
    if (t.numel() < 0) fuzz::violated("accepted a tensor whose element count overflows: " + t.name);
    if (t.end - t.begin != static_cast<uint64_t>(t.numel()) * safetensors::dtype_size(t.dtype))
      fuzz::violated("size mismatch: " + t.name);
    if (t.begin < last_end) fuzz::violated("overlap: " + t.name);
    if (header.data_start + t.end > size) fuzz::violated("tensor past the end of the file: " + t.name);
    last_end = t.end;
  }
  if (const auto it = header.metadata.find(kModelConfigKey); it != header.metadata.end()) {
    const auto j = nlohmann::json::parse(it->second, nullptr, false);
    if (j.is_discarded()) return 0;
    try {
      const auto cfg = model_config_from_json(j);
      count_parameters(cfg);
      state_size(cfg);
    } catch (const ConfigError&) {
    }
  }
  return 0;
}
