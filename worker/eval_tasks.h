// The runners of kind = "eval" jobs, one per kind of task adapter (contract/evaluation/eval_task.h): each scores a
// model on one task and returns its metrics and one record per document (or passkey prompt) for JOB/tasks/NAME.jsonl.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "contract/evaluation/eval_task.h"
#include "contract/job/job_spec.h"
#include "models/gpt.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

struct TaskRun {
  std::vector<std::pair<std::string, double>> metrics;  // "acc", "acc_stderr", ...; passkey also "acc.L1024.d50"
                                                        // mqar "seq_acc", "acc.L64.n4"
  std::vector<nlohmann::json> records;
};

// Multiple choice and LAMBADA: lm-eval's log-likelihood requests.
TaskRun run_choice_task(GPT& model, const Tokenizer& tok, const TaskSpec& task, const TaskAdapter& adapter,
                        int64_t batch);
// SWDE / FDA: the text cut around the answer, greedy generation until a newline, scored by `contains`.
TaskRun run_recall_task(GPT& model, const Tokenizer& tok, const TaskSpec& task, const TaskAdapter& adapter,
                        int64_t batch);
// Passkey: `filler_text` "" for landmark's repeated sentences; keys drawn from `seed`.
TaskRun run_passkey_task(GPT& model, const Tokenizer& tok, const TaskSpec& task, const std::string& filler_text,
                         int64_t batch, uint64_t seed);

// MQAR: the job's test batches (data.mqar.test_points, as its training job's test draws them), per point.
TaskRun run_mqar_task(GPT& model, const JobSpec& spec);

// The recall prompt of a document: its text's tokens cut to context_length - 50 around the first occurrence of the
// key or the value (the --cutting_context of Arora et al.'s harness), decoded, then ". " + key + ":".
std::string recall_prompt(const Tokenizer& tok, const EvalDoc& doc, int64_t context_length);
// Case-insensitive containment of the value in the output (re.search(re.escape(value), output, IGNORECASE)).
bool recall_contains(const std::string& output, const std::string& value);

}  // namespace fwlab
