// MMLU (lm-eval `mmlu`, the default template): "{question}\nA. ..\nB. ..\nC. ..\nD. ..\nAnswer:", choices the
// letters, gold `answer` (0..3); the description names the subject, and few-shot examples are the first k dev
// documents of the same subject (task_table.cpp: first_n_shots).
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_mmlu(const DocFields& f) {
  EvalDoc d;
  const auto options = f.texts("choices");
  if (options.size() != 4) f.fail("choices", "must hold 4 choices (A-D), got " + std::to_string(options.size()));
  d.text = strip(f.text("question"));
  const char* letters[] = {"A", "B", "C", "D"};
  for (size_t i = 0; i < 4; ++i) {
    d.text += "\n" + std::string(letters[i]) + ". " + options[i];
    d.choices.push_back(letters[i]);
  }
  d.text += "\nAnswer:";
  d.subject = f.nonempty_text("subject");
  d.gold = f.index("answer", 4);
  return d;
}

}  // namespace fwlab::tasks
