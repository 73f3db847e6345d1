// The files a job reads, checked before anything runs: by `fwlab sweep` for every job of a grid (so a missing
// corpus stops the sweep before its first job, not after) and by `fwlab-worker validate`. Torch-free.
#pragma once

#include <vector>

#include "contract/job_spec.h"

namespace fwlab {

// Every problem with the spec's input files, each naming its job key: a missing or empty corpus, token files
// of an odd or zero size, missing tokenizer files, a source checkpoint that is missing or not an fwlab
// checkpoint. `check_checkpoint` false skips init_checkpoint (a stage's parent writes it during the sweep).
std::vector<SpecError> input_problems(const JobSpec& spec, bool check_checkpoint = true);

}  // namespace fwlab
