// The registry of task adapters: a new task is a reader in contract/evaluation/tasks/ and a row here.
#include "contract/evaluation/eval_task.h"
#include "contract/model/named_rows.h"
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab {

const std::vector<TaskAdapter>& task_table() {
  using K = TaskKind;
  static const std::vector<TaskAdapter> rows = {
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
      {"recall",
       "based_swde / based_fda (Arora et al. 2024)",
       K::recall,
       {"text", "key", "value"},
       {"contains"},
       "contains",
       false,
       tasks::read_recall},
      {"passkey", "landmark-attention run_test.py (generated)", K::passkey, {}, {"acc"}, "acc", false, nullptr},
      {"mqar", "Zoology's MQAR test points (generated)", K::mqar, {}, {"acc", "seq_acc"}, "acc", false, nullptr},
  };
  return rows;
}

const TaskAdapter* find_task_adapter(const std::string& name) { return find_named_row(task_table(), name); }
std::vector<std::string> task_adapter_names() { return row_names(task_table()); }

}  // namespace fwlab
