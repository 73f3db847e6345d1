// lm-eval's request building: few-shot contexts, one request per choice, and _encode_pair's whitespace move.
#include <algorithm>

#include "contract/evaluation/eval_task.h"
#include "contract/job/file_identity.h"

namespace fwlab {

namespace {

// A shot as lm-eval renders it: its context, the target delimiter " ", its gold choice (Winogrande: the gold
// context, then the shared continuation). LAMBADA's shots get the delimiter too, before a target that already
// starts with a space: lm-eval's sampler adds it whatever the task's output type (build_qa_turn).
std::string render_shot(const EvalDoc& shot) {
  if (shot.multiple_input) return shot.choices[static_cast<size_t>(shot.gold)] + " " + shot.target;
  return shot.text + " " + shot.choices[static_cast<size_t>(shot.gold)];
}

std::vector<const EvalDoc*> choose_shots(const TaskAdapter& adapter, const EvalDoc& doc,
                                         const std::vector<EvalDoc>& pool, int64_t k, uint64_t seed) {
  std::vector<const EvalDoc*> shots;
  if (adapter.first_n_shots) {  // lm-eval's first_n sampler over the subject's dev split
    for (const auto& d : pool)
      if (static_cast<int64_t>(shots.size()) < k && d.subject == doc.subject) shots.push_back(&d);
    return shots;
  }
  std::vector<std::pair<std::string, const EvalDoc*>> keyed;
  for (const auto& d : pool) keyed.emplace_back(sha256_hex(std::to_string(seed) + ":" + std::to_string(d.line)), &d);
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size() && static_cast<int64_t>(i) < k; ++i) shots.push_back(keyed[i].second);
  return shots;
}

}  // namespace

std::string fewshot_prefix(const TaskAdapter& adapter, const EvalDoc& doc, const std::vector<EvalDoc>& pool, int64_t k,
                           uint64_t seed) {
  std::string prefix;
  if (adapter.first_n_shots) {  // MMLU's description, with the subject's underscores as spaces
    std::string subject = doc.subject;
    std::replace(subject.begin(), subject.end(), '_', ' ');
    prefix = "The following are multiple choice questions (with answers) about " + subject + ".\n\n";
  }
  if (k <= 0) return prefix;
  for (const auto* shot : choose_shots(adapter, doc, pool, k, seed)) prefix += render_shot(*shot) + "\n\n";
  return prefix;
}

std::vector<LlRequest> doc_requests(const TaskAdapter& adapter, const EvalDoc& doc, const std::string& prefix) {
  std::vector<LlRequest> out;
  for (const auto& choice : doc.choices) {
    if (doc.multiple_input)
      out.push_back({prefix + choice, " " + doc.target});
    else if (adapter.kind == TaskKind::loglikelihood)
      out.push_back({prefix + doc.text, choice});
    else
      out.push_back({prefix + doc.text, " " + choice});
  }
  return out;
}

LlRequest move_trailing_space(LlRequest r) {
  const auto keep = r.context.find_last_not_of(" \t\n\r\v\f");  // Python's rstrip()
  const size_t cut = keep == std::string::npos ? 0 : keep + 1;
  r.continuation = r.context.substr(cut) + r.continuation;
  r.context.resize(cut);
  return r;
}

}  // namespace fwlab
