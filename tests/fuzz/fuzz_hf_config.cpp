// A Hugging Face model directory as users download it: config.json, and (after the input's first NUL byte) the
// shard index model.safetensors.index.json. Read as the planner reads it (read_hf_config) and as the importer does
// (read_hf_checkpoint; the shards are absent here, so it stops at their names). Refused with ConfigError,
// FormatError or DataError naming the file; a configuration that reads has positive sizes.
#include "contract/formats/corpus_files.h"
#include "contract/formats/hf/checkpoint.h"
#include "contract/formats/safetensors_header.h"
#include "tests/fuzz/fuzz_target.h"

using namespace fwlab;

namespace {

void read_config(const std::string& dir) {
  try {
    const auto cfg = read_hf_config(dir);
    if (cfg.vocab <= 0 || cfg.d_model <= 0 || cfg.n_layers <= 0 || cfg.n_heads <= 0 || cfg.head_dim <= 0)
      fuzz::violated("read_hf_config accepted a configuration with a size that is not positive");
  } catch (const ConfigError&) {
  } catch (const safetensors::FormatError&) {
  } catch (const DataError&) {
  }
}

void read_checkpoint(const std::string& dir) {
  try {
    read_hf_checkpoint(dir);
  } catch (const ConfigError&) {
  } catch (const safetensors::FormatError&) {
  } catch (const DataError&) {
  }
}

}  // namespace

FWLAB_FUZZ_TARGET(hf_config) {
  const auto dir = fuzz::scratch_dir("hf_config");
  const auto [config, index] = fuzz::split_at_nul(data, size);
  fuzz::write_file(dir + "/config.json", reinterpret_cast<const uint8_t*>(config.data()), config.size());
  if (!index.empty())
    fuzz::write_file(dir + "/model.safetensors.index.json", reinterpret_cast<const uint8_t*>(index.data()),
                     index.size());
  read_config(dir);
  read_checkpoint(dir);
  return 0;
}
