// Evaluation tasks as lm-evaluation-harness defines them (kind = "eval" jobs): each task adapter turns one JSONL
// document of a public dataset into lm-eval's doc_to_text / doc_to_choice / gold, and the shared code builds the
// requests, few-shot contexts and metrics from that. Torch-free: `fwlab sweep` reads every task file with the
// same adapter before anything runs, so a bad document stops the sweep at its file, line and field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/formats/corpus_files.h"

namespace fwlab {

// A task file problem: "FILE:LINE: FIELD: message" (line 0: the file as a whole). Bad data: the worker exits 2.
class TaskFileError : public DataError {
 public:
  TaskFileError(const std::string& file, int64_t line, const std::string& field, const std::string& message);
};

// One document as lm-eval sees it. Multiple choice: `text` is the context and each choice a continuation
// (after the target delimiter " "). Winogrande's partial scoring (`multiple_input`): each choice is a context and
// `target` the one continuation. Log-likelihood tasks (LAMBADA): one choice, sent without a delimiter.
struct EvalDoc {
  int64_t line = 0;  // 1-based line of the task file (blank lines counted)
  std::string text;
  std::vector<std::string> choices;
  int64_t gold = 0;
  std::string target;  // multiple_input only
  bool multiple_input = false;
  std::string subject;     // MMLU: few-shot examples come from the same subject, and the description names it
  std::string key, value;  // recall extraction (SWDE / FDA): the attribute asked for and its value
};

// Reads one JSON document's fields; errors name the file, line and field.
class DocFields {
 public:
  DocFields(const nlohmann::json& doc, std::string file, int64_t line)
      : doc_(doc), file_(std::move(file)), line_(line) {}
  std::string text(const std::string& field) const;                  // a string (may be empty)
  std::string nonempty_text(const std::string& field) const;         // a string with at least one character
  int64_t integer(const std::string& field) const;                   // an integer, or a string holding one ("2")
  std::vector<std::string> texts(const std::string& field) const;    // a non-empty list of strings
  std::vector<std::string> choices(const std::string& field) const;  // ... none of them empty
  int64_t index(const std::string& field, int64_t n,
                int64_t first = 0) const;  // a gold index in [first, first + n), less first
  int64_t index_of(const std::string& field,
                   const std::vector<std::string>& labels) const;  // a label's index (ARC's "B")
  const nlohmann::json& member(const std::string& field) const;    // any value
  [[noreturn]] void fail(const std::string& field, const std::string& message) const;
  int64_t line() const { return line_; }

 private:
  const nlohmann::json& doc_;
  std::string file_;
  int64_t line_;
};

enum class TaskKind {
  multiple_choice,  // acc (and acc_norm) over the choices' log-likelihoods
  loglikelihood,    // LAMBADA: last-word accuracy (greedy) and perplexity
  recall,           // SWDE / FDA: greedy generation scored by `contains`
  passkey,          // generated: no task file
  mqar,             // the job's own MQAR test points (data.mqar), accuracy per point: no task file
};

// One row per adapter; contract/evaluation/task_table.cpp registers them, contract/evaluation/tasks/ holds each one's
// reader.
struct TaskAdapter {
  std::string name;
  std::string source;  // lm-eval task (or paper) it follows
  TaskKind kind = TaskKind::multiple_choice;
  std::vector<std::string> fields;   // what it reads from a document (experiments/README.md lists them)
  std::vector<std::string> metrics;  // what it reports ("acc", "acc_norm"; lambada: "acc", "ppl"; recall: "contains")
  std::string headline;              // the metric a table shows for it, as papers report the task
  bool first_n_shots = false;        // MMLU: the first k same-subject dev documents, not a seeded draw
  EvalDoc (*read)(const DocFields&) = nullptr;  // nullptr: passkey, mqar
  // Whose scoring the task repeats, written into each job's `task` event so that a figure says what it measures.
  std::string semantics = "lm-evaluation-harness 0.4.10";
};

const std::vector<TaskAdapter>& task_table();
const TaskAdapter* find_task_adapter(const std::string& name);  // nullptr for an unknown name
std::vector<std::string> task_adapter_names();

// The documents of a JSONL task file, read by `adapter` (the first `limit` documents when > 0). Throws
// TaskFileError at the first problem: unreadable file, a line that is not a JSON object, a missing or mistyped
// field, a gold index out of range, an empty choice, an empty context, no document at all.
std::vector<EvalDoc> read_task_file(const std::string& path, const TaskAdapter& adapter, int64_t limit = 0);

// One log-likelihood request: the continuation's log-probability given the context.
struct LlRequest {
  std::string context, continuation;
};

// The few-shot prefix of `doc`: MMLU's description, then each shot rendered as its context + " " + its gold
// choice and followed by "\n\n" (lm-eval's fewshot_delimiter). Shots: MMLU the first k documents of `pool` with
// the doc's subject; other tasks the k documents whose SHA-256 of "SEED:LINE" is smallest (a fixed draw that
// another implementation can repeat).
std::string fewshot_prefix(const TaskAdapter& adapter, const EvalDoc& doc, const std::vector<EvalDoc>& pool, int64_t k,
                           uint64_t seed);

// The requests of one document, one per choice, with `prefix` before every context.
std::vector<LlRequest> doc_requests(const TaskAdapter& adapter, const EvalDoc& doc, const std::string& prefix);

// lm-eval's _encode_pair's first step: trailing whitespace of the context moves to the front of the continuation.
LlRequest move_trailing_space(LlRequest r);

// Per-document scores and the task's metrics.
struct DocScore {
  std::vector<double> lls;
  std::vector<bool> greedy;
  int64_t gold = 0;
};
int64_t argmax_first(const std::vector<double>& v);  // ties go to the first index, as numpy's argmax
// Metrics of a multiple-choice or log-likelihood task: "acc", "acc_stderr", ["acc_norm", "acc_norm_stderr"],
// lambada's "ppl"; stderr is lm-eval's: sample standard deviation / sqrt(n).
std::vector<std::pair<std::string, double>> task_metrics(const TaskAdapter& adapter, const std::vector<EvalDoc>& docs,
                                                         const std::vector<DocScore>& scores);
double mean_stderr(const std::vector<double>& values);

}  // namespace fwlab
