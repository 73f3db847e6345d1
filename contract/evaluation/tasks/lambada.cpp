// LAMBADA (lm-eval `lambada_openai`): the text split on " "; the context is every word but the last, the target
// " " + the last word, sent without a delimiter. Scored by last-word accuracy (every target token greedy) and
// the perplexity exp(-mean log-likelihood) over documents.
#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

EvalDoc read_lambada(const DocFields& f) {
  EvalDoc d;
  const auto text = f.text("text");
  const auto space = text.rfind(' ');
  if (space == std::string::npos || space == 0)
    f.fail("text", "needs at least two words (the context and the last word)");
  if (space + 1 == text.size()) f.fail("text", "ends with a space: the last word is empty");
  d.text = text.substr(0, space);
  d.choices = {text.substr(space)};
  return d;
}

}  // namespace fwlab::tasks
