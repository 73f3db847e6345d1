// Recall extraction (SWDE, FDA; Arora et al. 2024, "Simple linear attention language models balance the
// recall-throughput tradeoff", the based_swde / based_fda tasks): a document's text, the attribute asked for
// (`key`) and its `value`. The prompt is the text cut around the answer, then ". " + key + ":" (worker/recall_task).
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_recall(const DocFields& f) {
  EvalDoc d;
  d.text = f.nonempty_text("text");
  d.key = f.nonempty_text("key");
  d.value = f.text("value");
  return d;
}

}  // namespace fwlab::tasks
