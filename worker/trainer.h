// One job of fwlab-worker: training / fine-tuning with evaluation, divergence detection and resumable
// checkpoints, or the generation benchmark. Everything that happens goes into the job's EventLog.
#pragma once

#include <string>

#include "models/convert.h"
#include "models/gpt.h"
#include "contract/job/events.h"
#include "contract/job/job_spec.h"

namespace fwlab {

// Set from the SIGINT / SIGTERM handler; the loops stop at the next step boundary.
void request_stop();
bool stop_requested();

// Builds the job's model: from its configuration (seeded), or converted from spec.init_checkpoint with
// spec.model overriding the source configuration, computing in spec.model_dtype (printed on stderr; the start
// event records it). With `log`, the conversion report is recorded.
GPT build_model(const JobSpec& spec, EventLog* log);
// The "conversion" event: what a swap-then-finetune copied, created and rescaled.
void log_conversion(EventLog& log, const std::string& source, const ConversionReport& report);

int run_training(const JobSpec& spec, const std::string& job_dir, EventLog& log);
int run_generation_bench(const JobSpec& spec, const std::string& job_dir, EventLog& log);
int run_attention_analysis(const JobSpec& spec, const std::string& job_dir, EventLog& log);  // kind = "attention"
int run_eval(const JobSpec& spec, const std::string& job_dir, EventLog& log);  // kind = "eval" (eval_job.cpp)

// Common fields of the "start" event: the job.json as run, the resolved model, sizes, host, versions.
StartEvent start_event(const JobSpec& spec, const std::string& job_dir, const GPT& model);
StartEvent start_event(const JobSpec& spec, const std::string& job_dir, const ModelConfig& cfg, int64_t params,
                       torch::ScalarType dtype);
int run_translate(const JobSpec& spec, const std::string& job_dir, EventLog& log);
int run_translation_bench(
    const JobSpec& spec, const std::string& job_dir,
    EventLog& log);  // generation-bench of an encoder-decoder  // kind = "translate" (translate_job.cpp)
int64_t peak_rss_bytes();

}  // namespace fwlab
