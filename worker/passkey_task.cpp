// Passkey accuracy over prompt lengths x depths (text/batches/passkey.h builds the prompts): 10 greedy tokens, right
// when their first number is the key. Each (length, depth) cell gets `trials` prompts with keys U{1..50000} and
// filler from its own place in the corpus.
#include <fmt/format.h>

#include <random>

#include "contract/formats/corpus_files.h"
#include "text/corpora/dataset.h"
#include "worker/eval_tasks.h"
#include "worker/greedy_until.h"
#include "text/batches/passkey.h"

namespace fwlab {

TaskRun run_passkey_task(GPT& model, const Tokenizer& tok, const TaskSpec& task, const std::string& filler_text,
                         int64_t batch, uint64_t seed) {
  const auto context = model->config().context;
  for (auto L : task.lengths)
    if (L + task.generated_tokens() > context)
      throw DataError(
          fmt::format("passkey: a prompt of {} tokens and {} generated ones exceed the model's context of {}", L,
                      task.generated_tokens(), context));
  const auto filler = passkey_filler(tok, filler_text);
  std::vector<PasskeyPrompt> prompts;
  std::vector<std::pair<int64_t, int64_t>> cells;
  for (auto L : task.lengths)
    for (auto depth : task.depths)
      for (int64_t trial = 0; trial < task.trials; ++trial) {
        std::mt19937_64 rng(mix_seed(seed, static_cast<uint64_t>(L), static_cast<uint64_t>(depth * 100000 + trial)));
        const auto key = std::uniform_int_distribution<int64_t>(1, 50000)(rng);
        const auto offset = std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(filler.size()) - 1)(rng);
        prompts.push_back(passkey_prompt(tok, filler, L, depth, key, offset));
        cells.emplace_back(L, depth);
      }
  std::vector<std::vector<int64_t>> ids;
  for (const auto& p : prompts) ids.push_back(p.ids);
  const auto outputs = greedy_until(model, tok, ids, {task.generated_tokens(), "", batch});
  TaskRun run;
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> per_cell;  // right, all
  int64_t right = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const bool ok = passkey_correct(outputs[i], prompts[i].key);
    right += ok;
    auto& c = per_cell[cells[i]];
    c.first += ok, c.second += 1;
    run.records.push_back({{"length", cells[i].first},
                           {"depth", cells[i].second},
                           {"key", prompts[i].key},
                           {"key_at", prompts[i].key_at},
                           {"output", outputs[i]},
                           {"correct", ok}});
  }
  run.metrics.emplace_back("acc", static_cast<double>(right) / static_cast<double>(prompts.size()));
  for (const auto& [cell, n] : per_cell)
    run.metrics.emplace_back(fmt::format("acc.L{}.d{}", cell.first, cell.second),
                             static_cast<double>(n.first) / static_cast<double>(n.second));
  return run;
}

}  // namespace fwlab
