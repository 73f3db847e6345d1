// HellaSwag (lm-eval `hellaswag`, utils.py process_docs): query = pre(activity_label + ": " + ctx_a + " " +
// ctx_b.capitalize()), choices = pre(each ending), gold = int(label). pre: strip, " [title]" -> ". ", drop
// "[...]" tags (non-greedy), then one pass of double space -> single.
#include <regex>

#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

namespace {

std::string preprocess(const std::string& text) {
  static const std::regex tag(R"(\[[^\n]*?\])");  // Python's "\[.*?\]": '.' stops at a newline
  auto s = replace_all(strip(text), " [title]", ". ");
  s = std::regex_replace(s, tag, "");
  return replace_all(s, "  ", " ");
}

}  // namespace

EvalDoc read_hellaswag(const DocFields& f) {
  EvalDoc d;
  d.text = preprocess(f.text("activity_label") + ": " + f.text("ctx_a") + " " + capitalize(f.text("ctx_b")));
  for (const auto& ending : f.texts("endings")) d.choices.push_back(preprocess(ending));
  for (size_t i = 0; i < d.choices.size(); ++i)
    if (d.choices[i].empty()) f.fail("endings", "ending " + std::to_string(i) + " is empty once preprocessed");
  d.gold = f.index("label", static_cast<int64_t>(d.choices.size()));
  return d;
}

}  // namespace fwlab::tasks
