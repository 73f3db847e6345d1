// lm-eval's metrics: acc, acc_norm (log-likelihood per character of the choice), perplexity, and the standard
// error of a mean (api/metrics.py mean_stderr: sample standard deviation / sqrt(n)).
#include <cmath>
#include <limits>

#include "contract/evaluation/eval_task.h"

namespace fwlab {

namespace {

// Characters as Python counts them: code points, i.e. UTF-8 bytes that do not continue a sequence.
double code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return static_cast<double>(n);
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(v.size());
}

}  // namespace

int64_t argmax_first(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  return best;
}

double mean_stderr(const std::vector<double>& values) {
  const auto n = static_cast<double>(values.size());
  if (values.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const double m = mean(values);
  double ss = 0;
  for (double x : values) ss += (x - m) * (x - m);
  return std::sqrt(ss / (n - 1)) / std::sqrt(n);
}

std::vector<std::pair<std::string, double>> task_metrics(const TaskAdapter& adapter, const std::vector<EvalDoc>& docs,
                                                         const std::vector<DocScore>& scores) {
  std::vector<double> acc, acc_norm, ll;
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto& s = scores[i];
    if (adapter.kind == TaskKind::loglikelihood) {
      acc.push_back(s.greedy.at(0) ? 1.0 : 0.0);
      ll.push_back(s.lls.at(0));
      continue;
    }
    acc.push_back(argmax_first(s.lls) == s.gold ? 1.0 : 0.0);
    std::vector<double> normed;
    for (size_t c = 0; c < s.lls.size(); ++c) normed.push_back(s.lls[c] / code_points(docs[i].choices[c]));
    acc_norm.push_back(argmax_first(normed) == s.gold ? 1.0 : 0.0);
  }
  std::vector<std::pair<std::string, double>> out = {{"acc", mean(acc)}, {"acc_stderr", mean_stderr(acc)}};
  for (const auto& m : adapter.metrics) {
    if (m == "acc_norm")
      out.insert(out.end(), {{"acc_norm", mean(acc_norm)}, {"acc_norm_stderr", mean_stderr(acc_norm)}});
    if (m == "ppl") out.emplace_back("ppl", std::exp(-mean(ll)));
  }
  return out;
}

}  // namespace fwlab
