// COPA (lm-eval `copa`, super_glue/copa/utils.py): the premise without its last character (the full stop) +
// " because" (question "cause") or " therefore" ("effect"); each choice is " " + its first letter lowered. With
// lm-eval's target delimiter the continuation starts with two spaces; lm-eval sends it so, and so does fwlab.
#include <cctype>

#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_copa(const DocFields& f) {
  EvalDoc d;
  const auto premise = strip(f.nonempty_text("premise"));
  const auto question = f.text("question");
  if (question != "cause" && question != "effect")
    f.fail("question", "must be \"cause\" or \"effect\", got \"" + question + "\"");
  d.text = premise.substr(0, premise.size() - 1) + (question == "cause" ? " because" : " therefore");
  for (const char* field : {"choice1", "choice2"}) {
    auto c = f.nonempty_text(field);
    if (static_cast<unsigned char>(c[0]) < 0x80)
      c[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(c[0])));
    d.choices.push_back(" " + c);
  }
  d.gold = f.index("label", 2);
  return d;
}

}  // namespace fwlab::tasks
