// Associative retrieval (Schlag et al. 2021, §4.1; contract/job/retrieval_settings.h): `pairs` key-value pair tokens,
// then `queries` query tokens; each is labelled with the value of its key.
#pragma once

#include <cstdint>

#include "contract/job/retrieval_settings.h"
#include "text/batches/mqar.h"

namespace fwlab {

// Deterministic in (spec, batch, seed). As the paper's generator (setting 1): keys and values each drawn without
// replacement, each query drawn uniformly from the sequence's keys not yet asked.
TaskBatch make_retrieval_batch(const RetrievalSpec& spec, int64_t batch, uint64_t seed);

}  // namespace fwlab
