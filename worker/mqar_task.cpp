// The mqar task: a checkpoint scored on its job's MQAR test points (data.mqar.test_points), the very batches the
// training job's test drew (same seeds, sizes and order), broken down by point. Zoology's trainer reports each
// (length, pairs) slice apart and averages accuracy per sequence; the training job's test pools every query.
// This reports all three: acc (pooled, equal to the training job's test accuracy), seq_acc (the mean of each
// sequence's accuracy, Zoology's), and acc.L{length}.n{pairs} for each point.
#include <fmt/format.h>

#include <map>

#include "worker/eval_tasks.h"
#include "worker/generated_eval.h"

namespace fwlab {

TaskRun run_mqar_task(GPT& model, const JobSpec& spec) {
  const auto device = model->wte->weight.device();
  const auto scores = score_generated_batches(model, spec, device, kTestStream);
  TaskRun run;
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> per_point;  // (L, n) -> (right, queries)
  int64_t right = 0, queries = 0;
  double sequence_accuracies = 0;
  for (const auto& s : scores) {
    right += s.correct, queries += s.queries;
    sequence_accuracies += static_cast<double>(s.correct) / static_cast<double>(s.queries);
    auto& p = per_point[{s.point.seq_len, s.point.pairs}];
    p.first += s.correct, p.second += s.queries;
    run.records.push_back({{"length", s.point.seq_len},
                           {"pairs", s.point.pairs},
                           {"batch", s.batch},
                           {"queries", s.queries},
                           {"correct", s.correct},
                           {"nll", s.nll}});
  }
  run.metrics.emplace_back("acc", static_cast<double>(right) / static_cast<double>(queries));
  run.metrics.emplace_back("seq_acc", sequence_accuracies / static_cast<double>(scores.size()));
  for (const auto& [point, n] : per_point)
    run.metrics.emplace_back(fmt::format("acc.L{}.n{}", point.first, point.second),
                             static_cast<double>(n.first) / static_cast<double>(n.second));
  return run;
}

}  // namespace fwlab
