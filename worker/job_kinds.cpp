#include "worker/job_kinds.h"

#include <fmt/format.h>

#include <stdexcept>

#include "contract/model/named_rows.h"
#include "worker/trainer.h"

namespace fwlab {

const std::vector<JobKindRow>& job_kind_rows() {
  static const std::vector<JobKindRow> rows = {
      {"train", run_training},                     // training and fine-tuning (worker/trainer.cpp)
      {"transfer", run_training},                  // attention transfer: the same loop with the teacher's MSE
      {"attention", run_attention_analysis},       // T2R's attention analysis (attention_job.cpp)
      {"generation-bench", run_generation_bench},  // generation time and memory (generation_bench.cpp)
      {"eval", run_eval},                          // evaluation tasks on a checkpoint (eval_job.cpp)
      {"translate", run_translate},                // encoder-decoder translation (translate_job.cpp)
  };
  return rows;
}

JobRunner job_runner(const std::string& kind) {
  if (const auto* row = find_named_row(job_kind_rows(), kind)) return row->run;
  throw std::logic_error(fmt::format("no runner for job kind '{}'", kind));
}

}  // namespace fwlab
