// Winogrande (lm-eval `winogrande`, partial scoring): the sentence up to its blank "_" followed by each option is
// a context; the rest of the sentence after the blank (stripped) is the one continuation both contexts score.
// answer "1" / "2".
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_winogrande(const DocFields& f) {
  EvalDoc d;
  const auto sentence = f.text("sentence");
  const auto blank = sentence.find('_');
  if (blank == std::string::npos) f.fail("sentence", "has no blank '_'");
  for (const char* field : {"option1", "option2"})
    d.choices.push_back(sentence.substr(0, blank) + f.nonempty_text(field));
  d.target = strip(sentence.substr(blank + 1));
  if (d.target.empty()) f.fail("sentence", "nothing follows the blank '_': the continuation would be empty");
  d.multiple_input = true;
  d.gold = f.index("answer", 2, 1);
  return d;
}

}  // namespace fwlab::tasks
