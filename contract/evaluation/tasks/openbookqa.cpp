// OpenBookQA (lm-eval `openbookqa`): the bare question_stem as context, the choices' texts, gold = answerKey's
// position among the labels.
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_openbookqa(const DocFields& f) {
  EvalDoc d;
  d.text = f.nonempty_text("question_stem");
  d.choices = f.choices("choices.text");
  const auto labels = f.texts("choices.label");
  if (labels.size() != d.choices.size()) f.fail("choices.label", "must have as many labels as choices.text has texts");
  std::vector<std::string> stripped;
  for (const auto& l : labels) stripped.push_back(strip(l));
  const auto key = strip(f.text("answerKey"));  // lm-eval strips the key
  d.gold = -1;
  for (size_t i = 0; i < stripped.size(); ++i)
    if (stripped[i] == key) d.gold = static_cast<int64_t>(i);
  if (d.gold < 0) f.fail("answerKey", "'" + key + "' is none of the choice labels");
  return d;
}

}  // namespace fwlab::tasks
