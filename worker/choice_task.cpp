// Multiple-choice and log-likelihood tasks in lm-eval's semantics (contract/evaluation/eval_task.h builds the
// requests).
#include "contract/formats/corpus_files.h"
#include "worker/eval_tasks.h"
#include "worker/loglikelihood.h"

namespace fwlab {

namespace {

std::vector<EvalDoc> shot_pool(const TaskSpec& task, const TaskAdapter& adapter) {
  if (task.num_fewshot == 0) return {};
  return read_task_file(task.fewshot_path, adapter);
}

nlohmann::json doc_record(const EvalDoc& doc, const DocScore& s, const std::vector<LlResult>& r) {
  nlohmann::json greedy = nlohmann::json::array();
  for (const auto& x : r) greedy.push_back(x.greedy);
  return {{"line", doc.line}, {"lls", s.lls}, {"is_greedy", greedy}, {"gold", s.gold}, {"pred", argmax_first(s.lls)}};
}

}  // namespace

TaskRun run_choice_task(GPT& model, const Tokenizer& tok, const TaskSpec& task, const TaskAdapter& adapter,
                        int64_t batch) {
  const auto docs = read_task_file(task.path, adapter, task.limit);
  const auto pool = shot_pool(task, adapter);
  std::vector<EncodedRequest> encoded;
  std::vector<size_t> first;  // each document's first request
  for (const auto& doc : docs) {
    first.push_back(encoded.size());
    const auto prefix = fewshot_prefix(adapter, doc, pool, task.num_fewshot, task.fewshot_seed);
    for (const auto& r : doc_requests(adapter, doc, prefix)) encoded.push_back(encode_request(tok, r));
  }
  const auto results = score_requests(model, encoded, batch);
  TaskRun run;
  std::vector<DocScore> scores;
  for (size_t d = 0; d < docs.size(); ++d) {
    const std::vector<LlResult> mine(results.begin() + static_cast<std::ptrdiff_t>(first[d]),
                                     results.begin() + static_cast<std::ptrdiff_t>(first[d] + docs[d].choices.size()));
    DocScore s;
    s.gold = docs[d].gold;
    for (const auto& r : mine) s.lls.push_back(r.ll), s.greedy.push_back(r.greedy);
    run.records.push_back(doc_record(docs[d], s, mine));
    scores.push_back(std::move(s));
  }
  run.metrics = task_metrics(adapter, docs, scores);
  return run;
}

}  // namespace fwlab
