// The registry of task adapters: a new task is a reader in contract/evaluation/tasks/ and a row here.
#include "contract/evaluation/eval_task.h"
#include "contract/model/named_rows.h"
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab {

namespace {

using K = TaskKind;

// The tasks read from a JSONL file of a public dataset and scored as lm-eval scores them.
std::vector<TaskAdapter> lm_eval_rows() {
  return {
      {"piqa",
       "lm-eval piqa",
       K::multiple_choice,
       {"goal", "sol1", "sol2", "label"},
       {"acc", "acc_norm"},
       "acc",
       false,
       tasks::read_piqa},
      {"arc",
       "lm-eval arc_easy / arc_challenge",
       K::multiple_choice,
       {"question", "choices.text", "choices.label", "answerKey"},
       {"acc", "acc_norm"},
       "acc_norm",
       false,
       tasks::read_arc},
      {"hellaswag",
       "lm-eval hellaswag",
       K::multiple_choice,
       {"activity_label", "ctx_a", "ctx_b", "endings", "label"},
       {"acc", "acc_norm"},
       "acc_norm",
       false,
       tasks::read_hellaswag},
      {"winogrande",
       "lm-eval winogrande (partial scoring)",
       K::multiple_choice,
       {"sentence", "option1", "option2", "answer"},
       {"acc"},
       "acc",
       false,
       tasks::read_winogrande},
      {"copa",
       "lm-eval copa (SuperGLUE)",
       K::multiple_choice,
       {"premise", "choice1", "choice2", "question", "label"},
       {"acc"},
       "acc",
       false,
       tasks::read_copa},
      {"openbookqa",
       "lm-eval openbookqa",
       K::multiple_choice,
       {"question_stem", "choices.text", "choices.label", "answerKey"},
       {"acc", "acc_norm"},
       "acc_norm",
       false,
       tasks::read_openbookqa},
      {"mmlu",
       "lm-eval mmlu (default template, dev shots)",
       K::multiple_choice,
       {"question", "subject", "choices", "answer"},
       {"acc"},
       "acc",
       true,
       tasks::read_mmlu},
      {"lambada",
       "lm-eval lambada_openai",
       K::loglikelihood,
       {"text"},
       {"acc", "ppl"},
       "acc",
       false,
       tasks::read_lambada},
  };
}

// The tasks that follow another harness's scoring: recall extraction from files, passkey and MQAR generated.
std::vector<TaskAdapter> other_rows() {
  return {
      {"recall",
       "based_swde / based_fda (Arora et al. 2024)",
       K::recall,
       {"text", "key", "value"},
       {"contains"},
       "contains",
       false,
       tasks::read_recall,
       "the recall harness of Arora et al. 2024 (greedy, at most 48 tokens, contains)"},
      {"passkey",
       "landmark-attention run_test.py (generated)",
       K::passkey,
       {},
       {"acc"},
       "acc",
       false,
       nullptr,
       "landmark-attention run_test.py (10 greedy tokens, the first number)"},
      {"mqar",
       "Zoology's MQAR test points (generated)",
       K::mqar,
       {},
       {"acc", "seq_acc"},
       "acc",
       false,
       nullptr,
       "fwlab's MQAR test batches (Zoology's points; pooled and per-sequence accuracy)"},
  };
}

}  // namespace

const std::vector<TaskAdapter>& task_table() {
  static const std::vector<TaskAdapter> rows = [] {
    auto all = lm_eval_rows();
    for (auto& row : other_rows()) all.push_back(std::move(row));
    return all;
  }();
  return rows;
}

const TaskAdapter* find_task_adapter(const std::string& name) { return find_named_row(task_table(), name); }
std::vector<std::string> task_adapter_names() { return row_names(task_table()); }

}  // namespace fwlab
