// Recall extraction (SWDE / FDA) as the harness of Arora et al. 2024 runs it: greedy generation of at most 48
// tokens, stopping at a newline, scored by whether the output contains the value (case-insensitive). Documents
// whose value has at most one character are dropped, as that harness drops them.
#include <algorithm>
#include <cctype>

#include "contract/formats/corpus_files.h"
#include "worker/eval_tasks.h"
#include "worker/greedy_until.h"

namespace fwlab {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool recall_contains(const std::string& output, const std::string& value) {
  return lower(output).find(lower(value)) != std::string::npos;
}

std::string recall_prompt(const Tokenizer& tok, const EvalDoc& doc, int64_t context_length) {
  const auto ids = tok.encode_plain(doc.text);
  const auto desired = static_cast<size_t>(context_length - 50);  // room for the answer
  std::string text = doc.text;
  if (ids.size() > desired) {
    const auto at = std::min(doc.text.find(doc.key), doc.text.find(doc.value));  // the first mention of either
    const size_t answer = at == std::string::npos ? 0 : tok.encode_plain(doc.text.substr(0, at)).size();
    const size_t start = answer > desired / 2 ? std::min(answer - desired / 2, ids.size() - desired) : 0;
    text = tok.decode(
        {ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start + desired)});
  }
  return text + ". " + doc.key + ":";
}

TaskRun run_recall_task(GPT& model, const Tokenizer& tok, const TaskSpec& task, const TaskAdapter& adapter,
                        int64_t batch) {
  std::vector<EvalDoc> docs;
  for (auto& d : read_task_file(task.path, adapter, task.limit))
    if (d.value.size() > 1) docs.push_back(std::move(d));
  if (docs.empty())
    throw DataError(task.path + ": no document has a value of two characters or more (shorter ones are dropped)");
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& d : docs) {
    const auto ids = tok.encode(recall_prompt(tok, d, task.context_length));
    prompts.emplace_back(ids.begin(), ids.end());
  }
  const auto outputs = greedy_until(model, tok, prompts, {task.generated_tokens(), "\n", batch});
  TaskRun run;
  std::vector<double> hits;
  for (size_t i = 0; i < docs.size(); ++i) {
    const bool hit = recall_contains(outputs[i], docs[i].value);
    hits.push_back(hit ? 1.0 : 0.0);
    run.records.push_back({{"line", docs[i].line},
                           {"key", docs[i].key},
                           {"value", docs[i].value},
                           {"output", outputs[i]},
                           {"contains", hit}});
  }
  double sum = 0;
  for (double h : hits) sum += h;
  run.metrics = {{"contains", hits.empty() ? 0.0 : sum / static_cast<double>(hits.size())},
                 {"contains_stderr", mean_stderr(hits)},
                 {"docs", static_cast<double>(docs.size())}};
  return run;
}

}  // namespace fwlab
