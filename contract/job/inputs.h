// The files a job reads, checked before anything runs: by `fwlab sweep` for every job of a grid (so a missing
// corpus stops the sweep before its first job, not after) and by `fwlab-worker validate`. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/job/job_spec.h"

namespace fwlab {

// Every problem with the spec's input files, each naming its job key: a missing or empty corpus, token files
// of an odd or zero size, missing tokenizer files, a source checkpoint that is missing or not an fwlab
// checkpoint, an enwik8 file too small to split, token ids past `model_vocab` (when > 0: the model the job
// builds). `check_checkpoint` false skips init_checkpoint (a stage's parent writes it during the sweep).
std::vector<SpecError> input_problems(const JobSpec& spec, bool check_checkpoint = true, int64_t model_vocab = 0);

// The model configuration of a source checkpoint (an fwlab safetensors file's header, or an hf: directory's
// config.json), when it can be read; the harness plans conversions with it, the worker finds teachers.
std::optional<nlohmann::json> checkpoint_model(const std::string& path);

}  // namespace fwlab
