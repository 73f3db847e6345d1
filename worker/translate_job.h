// kind = "translate": pieces of the translation job shared by its files (worker/translate_job.cpp trains,
// worker/translate_test.cpp decodes the test split and scores it).
#pragma once

#include <string>

#include "contract/job/events.h"
#include "contract/job/job_spec.h"
#include "models/seq2seq/seq2seq.h"
#include "worker/parallel_data.h"

namespace fwlab {

// The job's encoder-decoder: built from spec.model (seeded), or loaded from spec.init_checkpoint and converted to
// spec.model when it is given (the "conversion" event records what was copied and created).
Seq2Seq build_seq2seq(const JobSpec& spec, EventLog& log);

// Decodes data.test with spec.translate's search, writes JOB/translations/test.{hyp,ref}, records BLEU two ways
// ("bleu": tokenized, "sacrebleu": 13a) at `step`, and a "translation" event with the settings, counts and speed.
void translate_test(Seq2Seq& model, const SentencePieceModel& sp, const ParallelData& data, const JobSpec& spec,
                    const std::string& job_dir, int64_t step, EventLog& log);

}  // namespace fwlab
