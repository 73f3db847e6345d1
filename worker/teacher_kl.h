// KL(teacher || student) on the validation split: how far a converted model's next-token distributions are from the
// softmax teacher's, recorded beside the validation loss (metric valid_kl) by jobs that have a teacher. The KL-guided
// layer selection ranks its probes by it (harness/derive.h).
#pragma once

#include "contract/job/job_spec.h"
#include "models/gpt.h"
#include "text/corpora/corpus.h"

namespace fwlab {

// The mean over the scored positions of the evaluation windows (eval.last_half, eval.max_tokens as the validation
// loss has them), at temperature 1, in nats.
double validation_kl(GPT& student, GPT& teacher, const TokenStream& tokens, const JobSpec& spec, torch::Device device);

}  // namespace fwlab
