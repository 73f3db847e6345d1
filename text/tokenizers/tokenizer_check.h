// The tokenizers a job names, loaded as the worker loads them, so that a damaged file is refused before anything
// runs (fwlab-worker validate, fwlab sweep's pre-flight) rather than after the cells before it have spent hours.
#pragma once

#include <vector>

#include "contract/job/job_spec.h"

namespace fwlab {

// data.tokenizer = "hf:DIR" (its tokenizer.json, else tokenizer.model) and a translation job's data.vocab (a
// SentencePiece model with fairseq's pad, bos and eos ids): one SpecError on the key that names each file that
// does not load, with the loader's message (the file, and the entry or byte where the loader says). A file that
// is missing is input_problems' to report (contract/job/inputs.h). Each file is loaded once per process.
std::vector<SpecError> tokenizer_problems(const JobSpec& spec);

}  // namespace fwlab
