// ARC-Easy / ARC-Challenge (lm-eval `arc_easy`, `arc_challenge`): "Question: {question}\nAnswer:", the choices'
// texts, gold = the position of answerKey among the choices' labels ("A".."D", or "1".."4" in some documents).
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_arc(const DocFields& f) {
  EvalDoc d;
  d.text = "Question: " + f.text("question") + "\nAnswer:";
  d.choices = f.choices("choices.text");
  const auto labels = f.texts("choices.label");
  if (labels.size() != d.choices.size()) f.fail("choices.label", "must have as many labels as choices.text has texts");
  d.gold = f.index_of("answerKey", labels);
  return d;
}

}  // namespace fwlab::tasks
