#include "harness/derive.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "contract/model/named_rows.h"

namespace fwlab {

const std::vector<SelectorRow>& selector_rows() {
  static const std::vector<SelectorRow> rows = {
      {"uniform", SelectorInput::none, "k layers evenly spaced: layer floor((j + 1/2) L / k) for j < k"},
      {"first", SelectorInput::none, "the first k layers"},
      {"last", SelectorInput::none, "the last k layers"},
      {"random", SelectorInput::none, "k layers drawn at random with `seed` (the control)"},
      {"transfer_error", SelectorInput::transfer,
       "the k layers whose attention transfer left the largest output error (transfer_mse.LAYER of the `transfer` "
       "stage's jobs, their mean): the layers hardest to linearise stay softmax"},
      {"kl_guided", SelectorInput::probes,
       "the k layers whose probe (that layer alone restored to softmax, a short distillation) reached the lowest "
       "`metric` (valid_kl: the KL to the teacher on validation text), as the KL-guided layer selection ranks them"},
      {"perplexity", SelectorInput::probes, "as kl_guided, ranking the probes by their validation perplexity"},
  };
  return rows;
}

namespace {

const std::set<std::string> kDeriveKeys = {"stage",     "key",    "selector", "count",    "probes",
                                           "probe_key", "metric", "order",    "transfer", "seed"};

struct DeriveReader {
  const Experiment& ex;
  std::string name;

  SourcePos pos(const std::string& key) const {
    const auto full = "derive." + name + (key.empty() ? "" : "." + key);
    const auto it = ex.analysis_pos.find(full);
    return it != ex.analysis_pos.end() ? it->second : SourcePos{ex.file, 1, 1, {}};
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw ExperimentError(
        fmt::format("{}: derive.{}{}: {}", pos(key).str(), name, key.empty() ? "" : "." + key, message));
  }
  const Stage* stage(const std::string& key, const std::string& value) const {
    for (const auto& s : ex.stages)
      if (s.name == value) return &s;
    std::vector<std::string> names;
    for (const auto& s : ex.stages) names.push_back(s.name);
    fail(key, fmt::format("stage '{}' does not exist{}", value, did_you_mean(value, names)));
  }
  const Axis* axis(const std::string& value) const {
    for (const auto& a : ex.axes)
      if (a.name == value) return &a;
    return nullptr;
  }
};

std::string text(const DeriveReader& r, const nlohmann::json& t, const std::string& key) {
  if (!t.contains(key)) return "";
  if (!t[key].is_string()) r.fail(key, "must be a string");
  return t[key].get<std::string>();
}

// The selectors a derivation's cells use: its one selector, or every value of its selector axis (`as_written`: the
// values the file wrote, before a profile or --set took a subset, so that a key only some selectors read is not
// "changing nothing" in a subset that leaves those out).
std::vector<const SelectorRow*> selectors_used(const DeriveReader& r, const Derivation& d, const Stage& stage,
                                               bool as_written) {
  std::vector<std::string> names;
  for (const auto& row : selector_rows()) names.push_back(row.name);
  std::vector<std::string> used;
  if (const auto* a = r.axis(d.selector_axis)) {
    if (std::find(stage.axes.begin(), stage.axes.end(), a->name) == stage.axes.end())
      r.fail("selector", fmt::format("axis '{}' does not vary stage '{}'", a->name, stage.name));
    const auto written = r.ex.written_axes.find(a->name);
    const auto& values = as_written && written != r.ex.written_axes.end() ? written->second : a->values;
    for (const auto& v : values) used.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  } else {
    used.push_back(d.selector);
  }
  std::vector<const SelectorRow*> out;
  for (const auto& u : used) {
    const auto* row = find_named_row(selector_rows(), u);
    if (!row && !d.selector_axis.empty())  // a value of the selector axis
      throw ExperimentError(fmt::format("{}: grid.{}: '{}' is not a selector ({}){}",
                                        r.axis(d.selector_axis)->pos.str(), d.selector_axis, u, fmt::join(names, ", "),
                                        did_you_mean(u, names)));
    if (!row)
      r.fail("selector", fmt::format("'{}' is neither a selector ({}) nor an axis of the grid{}", u,
                                     fmt::join(names, ", "), did_you_mean(u, names)));
    out.push_back(row);
  }
  return out;
}

// count: an axis of the stage whose values are positive integers.
void check_count(const DeriveReader& r, const Derivation& d, const Stage& stage) {
  const auto* a = r.axis(d.count_axis);
  if (!a)
    r.fail("count", fmt::format("'{}' is not an axis of the grid (the axis giving how many layers)", d.count_axis));
  if (std::find(stage.axes.begin(), stage.axes.end(), a->name) == stage.axes.end())
    r.fail("count", fmt::format("axis '{}' does not vary stage '{}'", a->name, stage.name));
  for (const auto& v : a->values)
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      r.fail("count",
             fmt::format("axis '{}' holds {}: every value must be a positive number of layers", a->name, v.dump()));
}

// The input stage a selector reads (probes / transfer): given where a selector needs it, refused where none does.
void check_input_stage(const DeriveReader& r, const Derivation& d, const std::string& key, const std::string& value,
                       bool needed) {
  if (!needed && !value.empty())
    r.fail(key, fmt::format("no selector of derive.{} reads it: it would change nothing", d.name));
  if (!needed) return;
  if (value.empty()) r.fail("", fmt::format("a selector here reads the stage given by `{}`: name it", key));
  if (value == d.stage) r.fail(key, "a stage cannot rank its own cells: name an earlier stage");
  r.stage(key, value);
}

Derivation read_one(const Experiment& ex, const std::string& name, const nlohmann::json& t) {
  DeriveReader r{ex, name};
  if (!t.is_object()) r.fail("", "must be a table: stage, selector, count, ...");
  for (const auto& [k, v] : t.items())
    if (!kDeriveKeys.count(k))
      r.fail(k, "unknown key" + did_you_mean(k, std::vector<std::string>(kDeriveKeys.begin(), kDeriveKeys.end())));
  Derivation d;
  d.name = name, d.pos = r.pos("");
  d.stage = text(r, t, "stage");
  if (d.stage.empty()) r.fail("", "needs stage: the stage whose jobs get the derived setting");
  const auto& stage = *r.stage("stage", d.stage);
  if (const auto key = text(r, t, "key"); !key.empty() && key != d.key)
    r.fail("key", fmt::format("only {} is derived (the layers that stay softmax), not '{}'", d.key, key));
  if (stage.settings.count(d.key) || ex.defaults.count(d.key))
    r.fail("stage", fmt::format("stage '{}' sets {} itself: the derived value would replace it", d.stage, d.key));
  const auto selector = text(r, t, "selector");
  if (selector.empty()) r.fail("", "needs selector: a selector's name, or the axis naming each cell's");
  (r.axis(selector) ? d.selector_axis : d.selector) = selector;
  if (!t.contains("count") || !t["count"].is_string()) r.fail("count", "needs count: the axis giving how many layers");
  d.count_axis = t["count"].get<std::string>();
  check_count(r, d, stage);
  d.probes = text(r, t, "probes"), d.transfer = text(r, t, "transfer");
  if (const auto pk = text(r, t, "probe_key"); !pk.empty()) d.probe_key = pk;
  if (const auto m = text(r, t, "metric"); !m.empty()) d.metric = m;
  if (const auto order = text(r, t, "order"); !order.empty()) {
    if (order != "ascending" && order != "descending") r.fail("order", "must be ascending or descending");
    d.ascending = order == "ascending";
  }
  selectors_used(r, d, stage, false);  // every selector the cells run exists
  bool probes = false, transfer = false, random = false;
  for (const auto* row : selectors_used(r, d, stage, true)) {
    probes = probes || row->input == SelectorInput::probes;
    transfer = transfer || row->input == SelectorInput::transfer;
    random = random || row->name == "random";
  }
  check_input_stage(r, d, "probes", d.probes, probes);
  check_input_stage(r, d, "transfer", d.transfer, transfer);
  for (const char* key : {"metric", "order", "probe_key"})
    if (!probes && t.contains(key)) r.fail(key, "only the probe selectors read it: it would change nothing");
  if (t.contains("seed")) {
    if (!random) r.fail("seed", "only the random selector draws: it would change nothing");
    if (!t["seed"].is_number_integer()) r.fail("seed", "must be an integer");
    d.seed = t["seed"].get<int64_t>();
  }
  return d;
}

// The k layers a selector that reads nothing chooses among L.
std::vector<int64_t> fixed_layers(const std::string& selector, int64_t k, int64_t L, int64_t seed) {
  std::vector<int64_t> out;
  if (selector == "uniform")
    for (int64_t j = 0; j < k; ++j) out.push_back((2 * j + 1) * L / (2 * k));
  if (selector == "first")
    for (int64_t j = 0; j < k; ++j) out.push_back(j);
  if (selector == "last")
    for (int64_t j = L - k; j < L; ++j) out.push_back(j);
  if (selector == "random") {
    std::vector<int64_t> all(static_cast<size_t>(L));
    std::iota(all.begin(), all.end(), 0);
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    for (int64_t i = L - 1; i > 0; --i)  // Fisher-Yates with the draws written out: the same on every platform
      std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(rng() % static_cast<uint64_t>(i + 1))]);
    out.assign(all.begin(), all.begin() + k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<Derivation> read_derivations(const Experiment& ex) {
  std::vector<Derivation> out;
  std::set<std::string> stages;
  for (const auto& [name, t] : ex.derive.items()) {
    out.push_back(read_one(ex, name, t));
    if (!stages.insert(out.back().stage).second)
      DeriveReader{ex, name}.fail("stage",
                                  fmt::format("stage '{}' already has a derived {}", out.back().stage, out.back().key));
  }
  return out;
}

namespace {

// Each input's status and score: waiting where one has not ended, DerivationError where one ended without a result.
struct Scored {
  nlohmann::json layers;
  std::string job_id;
  double score = 0;
};

// An input that will still end (not started, queued, running, or interrupted and to be resumed).
bool still_to_end(const std::optional<JobStatus>& s) {
  return !s || *s == JobStatus::pending || *s == JobStatus::submitted || *s == JobStatus::running ||
         *s == JobStatus::interrupted;
}

// The inputs' scores: one per probe (its `metrics[0]`), or one per layer of each transfer job (metrics[i] is layer
// i's). nullopt (and `waiting` says why) while an input has not ended.
std::optional<std::vector<Scored>> scored_inputs(const DerivationCell& c, const std::vector<DerivationInput>& inputs,
                                                 const JobResults* results, const std::vector<std::string>& metrics,
                                                 std::string& waiting) {
  std::vector<std::string> unfinished, failed;
  std::vector<Scored> out;
  for (const auto& in : inputs) {
    const auto status = results ? results->status(in.job_id) : std::nullopt;
    if (still_to_end(status)) {
      unfinished.push_back(in.job_id);
      continue;
    }
    if (*status != JobStatus::finished) {
      failed.push_back(fmt::format("{} ({})", in.job_id, to_string(*status)));
      continue;
    }
    for (size_t i = 0; i < metrics.size(); ++i) {
      const auto v = results->value(in.job_id, metrics[i]);
      if (!v) failed.push_back(fmt::format("{} (finished without {})", in.job_id, metrics[i]));
      const auto layers = metrics.size() > 1 ? nlohmann::json::array({i}) : in.layers;
      if (v) out.push_back({layers, in.job_id, *v});
    }
  }
  if (!failed.empty())
    throw DerivationError(
        fmt::format("derive.{}: {} for {} reads jobs that ended without a result: {}; run them again (fwlab sweep "
                    "--retry-diverged or --retry-failed) or leave the selector out",
                    c.d.name, c.selector, c.label, fmt::join(failed, ", ")));
  if (!unfinished.empty()) {
    waiting = fmt::format("{} waits for {} of its {} input job(s): {}", c.label, unfinished.size(), inputs.size(),
                          fmt::join(unfinished, ", "));
    return std::nullopt;
  }
  if (inputs.empty())
    throw DerivationError(fmt::format("derive.{}: {} for {}: no job of its input stage shares the cell's settings",
                                      c.d.name, c.selector, c.label));
  return out;
}

// Each layer's mean score over the transfer jobs that scored it (several seeds of one cell).
std::vector<Scored> layer_means(const std::vector<Scored>& scored) {
  std::map<int64_t, std::pair<double, int>> sums;
  for (const auto& s : scored) {
    auto& [sum, n] = sums[s.layers[0].get<int64_t>()];
    sum += s.score, ++n;
  }
  std::vector<Scored> out;
  for (const auto& [layer, sn] : sums) out.push_back({nlohmann::json::array({layer}), "mean", sn.first / sn.second});
  return out;
}

// The layers of the best-ranked inputs until k are chosen (a probe may restore several), and the ranking kept.
Derived ranked(const DerivationCell& c, std::vector<Scored> scored, bool ascending, const std::string& metric) {
  std::stable_sort(scored.begin(), scored.end(),
                   [&](const Scored& a, const Scored& b) { return ascending ? a.score < b.score : a.score > b.score; });
  std::set<int64_t> chosen;
  nlohmann::json ranking = nlohmann::json::array();
  for (const auto& s : scored) {
    ranking.push_back({{"job", s.job_id}, {"layers", s.layers}, {"score", s.score}});
    for (const auto& l : s.layers)
      if (static_cast<int64_t>(chosen.size()) < c.count && l.is_number_integer()) chosen.insert(l.get<int64_t>());
  }
  if (static_cast<int64_t>(chosen.size()) < c.count)
    throw DerivationError(fmt::format("derive.{}: {} for {}: its inputs rank {} layers, fewer than the {} asked for",
                                      c.d.name, c.selector, c.label, chosen.size(), c.count));
  Derived d;
  d.ready = true;
  d.value = std::vector<int64_t>(chosen.begin(), chosen.end());
  d.record = {{"metric", metric}, {"order", ascending ? "ascending" : "descending"}, {"ranking", ranking}};
  return d;
}

}  // namespace

Derived derive_layers(const DerivationCell& c, const std::vector<DerivationInput>& inputs, const JobResults* results) {
  if (c.count > c.n_layers)
    throw DerivationError(
        fmt::format("derive.{}: {} asks for {} layers of a model of {}", c.d.name, c.label, c.count, c.n_layers));
  const auto& row = *find_named_row(selector_rows(), c.selector);
  Derived out;
  if (row.input == SelectorInput::none) {
    out.ready = true;
    out.value = fixed_layers(c.selector, c.count, c.n_layers, c.d.seed);
    out.record = nlohmann::json::object();
  } else {
    std::vector<std::string> metrics;
    if (row.input == SelectorInput::probes) metrics.push_back(c.selector == "perplexity" ? "valid_ppl" : c.d.metric);
    for (int64_t i = 0; row.input == SelectorInput::transfer && i < c.n_layers; ++i)
      metrics.push_back(fmt::format("transfer_mse.{}", i));
    auto scored = scored_inputs(c, inputs, results, metrics, out.waiting);
    if (!scored) return out;
    if (row.input == SelectorInput::transfer && inputs.size() > 1) *scored = layer_means(*scored);
    const bool ascending = row.input == SelectorInput::probes ? (c.selector == "perplexity" || c.d.ascending) : false;
    out = ranked(c, *scored, ascending, row.input == SelectorInput::transfer ? "transfer_mse" : metrics[0]);
  }
  out.record["derivation"] = c.d.name, out.record["selector"] = c.selector, out.record["count"] = c.count;
  out.record["n_layers"] = c.n_layers, out.record["key"] = c.d.key, out.record["value"] = out.value;
  return out;
}

}  // namespace fwlab
