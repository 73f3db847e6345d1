// job.json: the worker's spec parser, model configuration included.
#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_target.h"
#include "contract/job/job_spec.h"

using namespace fwlab;

FWLAB_FUZZ_TARGET(job_spec) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const auto spec = parse_job_spec(j, "/nonexistent-fwlab-fuzz-root");
    if (spec.init_checkpoint.empty()) {  // a spec that parsed builds a model of a size fwlab can hold
      const auto cfg = model_config_from_json(spec.model);
      if (count_parameters(cfg) <= 0) fuzz::violated("a valid spec with a non-positive parameter count");
    }
  } catch (const SpecError&) {
  }
  return 0;
}
