// PIQA (lm-eval `piqa`): "Question: {goal}\nAnswer:", choices sol1 / sol2, gold `label`.
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_piqa(const DocFields& f) {
  EvalDoc d;
  d.text = "Question: " + f.text("goal") + "\nAnswer:";
  for (const char* field : {"sol1", "sol2"}) {
    d.choices.push_back(f.nonempty_text(field));
  }
  d.gold = f.index("label", 2);
  return d;
}

}  // namespace fwlab::tasks
