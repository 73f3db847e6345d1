#include "analysis/metric.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include "contract/evaluation/eval_task.h"

namespace fwlab {

namespace {

const std::set<std::string> kEvalFields = {"loss", "ppl", "bpc", "accuracy"};
// Metric keys of the worker's record (worker/README.md "The record").
const std::set<std::string> kSeriesKeys = {"train_loss",
                                           "valid_kl",
                                           "lr",
                                           "grad_norm",
                                           "step_ms",
                                           "tokens_per_s",
                                           "peak_rss_bytes",
                                           "state_max_abs",
                                           "gen_ms_per_token",
                                           "gen_ms_per_token_min",
                                           "gen_ms_per_token_max",
                                           "gen_state_bytes",
                                           "gen_peak_rss_bytes",
                                           "bleu",
                                           "sacrebleu"};  // translation jobs: test BLEU, tokenized and 13a

// Metric keys with per-layer (and per-head) variants: "attn_distance", "attn_distance.l2", "attn_distance.l2.h0";
// transfer_mse only per layer ("transfer_mse.2").
const std::set<std::string> kLayeredKeys = {"attn_distance", "attn_entropy", "teacher_entropy", "transfer_mse"};

bool known_series_key(const std::string& key) {
  if (kSeriesKeys.count(key) || (kLayeredKeys.count(key) && key != "transfer_mse")) return true;
  const auto dot = key.find('.');
  return dot != std::string::npos && dot + 1 < key.size() && kLayeredKeys.count(key.substr(0, dot));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Metric parse_metric(const std::string& name) {
  Metric m;
  m.name = name;
  const auto fail = [&] {
    throw std::invalid_argument(fmt::format(
        "unknown metric '{}' (use test_<f> or valid_<f> with f in loss, ppl, bpc, accuracy; params; state_elements; "
        "config:<job key>; task:<task>[.<metric>]; or a metric key of the record, optionally @<step>: {}; {} (with "
        ".l<layer>[.h<head>]), "
        "transfer_mse.<layer>)",
        name, fmt::join(kSeriesKeys, ", "),
        fmt::join(std::vector<std::string>{"attn_distance", "attn_entropy", "teacher_entropy"}, ", ")));
  };
  if (name.rfind("config:", 0) == 0) {
    m.source = Metric::Source::Config;
    m.field = name.substr(7);
    if (m.field.empty()) fail();
    return m;
  }
  if (name.rfind("task:", 0) == 0) {  // an evaluation task's metric (contract/evaluation/eval_task.h)
    m.source = Metric::Source::Task;
    m.key = name.substr(5);
    if (const auto dot = m.key.find('.'); dot != std::string::npos) m.field = m.key.substr(dot + 1), m.key.resize(dot);
    if (m.key.empty() || (m.key.size() + 6 < name.size() && m.field.empty())) fail();
    m.higher_is_better = m.field != "ppl";
    return m;
  }
  if (name == "params" || name == "state_elements") {
    m.source = Metric::Source::Job;
    m.field = name;
    m.is_count = true;
    return m;
  }
  for (const std::string split : {"test", "valid"}) {
    if (name.rfind(split + "_", 0) == 0 && kEvalFields.count(name.substr(split.size() + 1))) {
      m.source = Metric::Source::Eval;
      m.split = split;
      m.field = name.substr(split.size() + 1);
      m.higher_is_better = m.field == "accuracy";
      return m;
    }
  }
  m.source = Metric::Source::Series;
  m.key = name;
  if (auto at = name.find('@'); at != std::string::npos) {
    m.key = name.substr(0, at);
    const auto step = name.substr(at + 1);
    if (step.empty() || step.find_first_not_of("0123456789") != std::string::npos) fail();
    m.at_step = std::stoll(step);
  }
  if (!known_series_key(m.key)) fail();
  m.higher_is_better = m.key == "tokens_per_s" || m.key == "bleu" || m.key == "sacrebleu";
  m.is_count = m.key.find("bytes") != std::string::npos;
  return m;
}

std::optional<double> Metric::value(const JobRecord& job, const ResultSet& results) const {
  switch (source) {
    case Source::Job:
      return static_cast<double>(field == "params" ? job.planned.params
                                                   : job.planned.state.elements_at(job.planned.context));
    case Source::Config: {
      const auto v = job_value(job, field);
      if (v.is_number()) return v.get<double>();
      return std::nullopt;
    }
    case Source::Eval: {
      const EvalRow* chosen = nullptr;
      for (const auto& e : job.evals) {
        if (e.split != split || !e.loss) continue;
        // test: the evaluation of the best checkpoint (the last one, should a resumed job have two);
        // valid: the best validation loss over the run, the checkpoint the test evaluation used.
        if (split == "test" ? true : (!chosen || *e.loss < *chosen->loss)) chosen = &e;
      }
      if (!chosen) return std::nullopt;
      const auto& v = chosen->field(field);
      if (v && std::isfinite(*v)) return *v;
      return std::nullopt;
    }
    case Source::Task: {
      const auto adapter_name = job_value(job, "tasks." + key + ".adapter");
      const auto* adapter = find_task_adapter(adapter_name.is_string() ? adapter_name.get<std::string>() : key);
      const auto metric = !field.empty() ? field : adapter ? adapter->headline : "acc";
      const auto& s = results.series(job.id(), key + "." + metric);
      if (s.empty() || !std::isfinite(s.rbegin()->second)) return std::nullopt;
      return metric == "ppl" || metric == "docs" ? s.rbegin()->second : 100.0 * s.rbegin()->second;
    }
    case Source::Series: {
      const auto& s = results.series(job.id(), key);
      if (s.empty()) return std::nullopt;
      if (at_step) {
        auto it = s.find(*at_step);
        if (it == s.end() || !std::isfinite(it->second)) return std::nullopt;
        return it->second;
      }
      // Throughput: the median over the run (the first interval includes warm-up); memory: the peak; anything
      // else: the last value.
      std::vector<double> finite;
      for (const auto& [step, v] : s)
        if (std::isfinite(v)) finite.push_back(v);
      if (finite.empty()) return std::nullopt;
      if (key == "tokens_per_s" || key == "step_ms") return median(finite);
      if (key.find("rss") != std::string::npos) return *std::max_element(finite.begin(), finite.end());
      return finite.back();
    }
  }
  return std::nullopt;
}

std::string Metric::units() const {
  if (source == Source::Eval) {
    const std::string which = split == "valid" ? "validation" : split;
    if (field == "ppl") return fmt::format("{} perplexity", which);
    if (field == "bpc") return fmt::format("{} bits per byte", which);
    if (field == "accuracy") return fmt::format("{} accuracy", which);
    return fmt::format("{} loss (nats per token)", which);
  }
  if (source == Source::Job) return field == "params" ? "parameters" : "state elements per sequence";
  if (source == Source::Config) return field;
  if (source == Source::Task) return field == "ppl" ? key + " perplexity" : key + " accuracy (%)";
  if (key == "tokens_per_s") return "training tokens per second";
  if (key == "bleu") return "test BLEU (tokenized, fairseq's scorer)";
  if (key == "sacrebleu") return "test BLEU (sacreBLEU 13a)";
  if (key == "step_ms") return "ms per training step";
  if (key.rfind("gen_ms", 0) == 0) return "ms per generated token";
  if (key.find("bytes") != std::string::npos) return key == "gen_state_bytes" ? "state bytes" : "peak RSS bytes";
  if (key.rfind("attn_distance", 0) == 0) return "distance to the teacher's attention";
  if (key.rfind("attn_entropy", 0) == 0) return "attention entropy (nats)";
  if (key.rfind("teacher_entropy", 0) == 0) return "teacher's attention entropy (nats)";
  return key;
}

std::string compact_count(double n) {
  if (std::fabs(n) >= 1e9) return fmt::format("{:.1f}G", n / 1e9);
  if (std::fabs(n) >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (std::fabs(n) >= 1e4) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{}", static_cast<int64_t>(std::llround(n)));
}

}  // namespace fwlab
