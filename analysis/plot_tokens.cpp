// `fwlab plot`'s quality-per-token figure ([[plot]] kind = "vs_tokens"): an evaluation metric against the training
// tokens a conversion has seen since its teacher, one line per cell (the plot's series: the table's rows and
// columns by default), seeds pooled into the mean with their spread as a band; the table's references (the teacher)
// as levels. A stage that starts from another (transfer -> finetune) counts the tokens of the stages before it, up
// to the reference stage it came from. Jobs evaluated on eval.schedule = "log" give points dense early, where the
// methods differ most.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "analysis/plot_panels.h"
#include "analysis/table.h"
#include "contract/job/job_spec.h"

namespace fwlab::plotting {
namespace {

// A job.json key, or the worker's default where the file leaves it out.
int64_t spec_int(const nlohmann::json& spec, const char* pointer, int64_t fallback) {
  const auto p = nlohmann::json::json_pointer(pointer);
  return spec.contains(p) && spec.at(p).is_number_integer() ? spec.at(p).get<int64_t>() : fallback;
}

// Tokens a job trains on per step: batch x sequence length x accumulation.
double tokens_per_step(const JobRecord& j) {
  const JobSpec defaults;
  const auto& s = j.planned.spec;
  const bool task = s.value(nlohmann::json::json_pointer("/data/source"), std::string()) == "mqar";
  const int64_t T = task ? spec_int(s, "/data/mqar/seq_len", defaults.data.mqar.seq_len)
                         : spec_int(s, "/train/seq_len", defaults.train.seq_len);
  return static_cast<double>(spec_int(s, "/train/batch_size", defaults.train.batch_size) * T *
                             spec_int(s, "/train/grad_accum", defaults.train.grad_accum));
}

// Tokens of the stages a job starts from, back to (not counting) a reference stage such as the teacher.
double tokens_before(const ResultSet& results, const TableSpec& spec, const JobRecord& j) {
  double total = 0;
  const JobRecord* at = &j;
  for (int guard = 0; guard < 64 && !at->planned.depends_on.empty(); ++guard) {
    const JobRecord* parent = nullptr;
    for (const auto& other : results.jobs())
      if (other.id() == at->planned.depends_on) parent = &other;
    if (!parent) break;
    for (const auto& ref : spec.references)
      if (ref.stage == parent->stage()) return total;
    total += tokens_per_step(*parent) *
             static_cast<double>(spec_int(parent->planned.spec, "/train/steps", JobSpec{}.train.steps));
    at = parent;
  }
  return total;
}

// One cell's line: x (tokens) -> the runs' values there; the mean, and the spread (sd) where several runs have one.
Series cell_series(const ResultSet& results, const TableSpec& spec, const PlotSpec& plot,
                   const std::vector<const JobRecord*>& runs, const std::string& label) {
  Series se;
  se.title = label;
  se.band = true;
  std::map<double, std::vector<double>> at_x;
  for (const auto* j : runs) {
    if (!j->status || j->status == JobStatus::pending) continue;
    const double offset = tokens_before(results, spec, *j), per_step = tokens_per_step(*j);
    for (const auto& e : j->evals)
      if (e.split == "valid")
        if (const auto& v = e.field(plot.metric.field); v && std::isfinite(*v))
          at_x[offset + per_step * static_cast<double>(e.step)].push_back(*v);
    if (j->diverged()) se.title += " (a run diverged)", se.dashed = true;
  }
  for (const auto& [x, values] : at_x) {
    double mean = 0, sq = 0;
    for (double v : values) mean += v / static_cast<double>(values.size());
    for (double v : values) sq += (v - mean) * (v - mean);
    const double sd = values.size() > 1 ? std::sqrt(sq / static_cast<double>(values.size() - 1)) : 0.0;
    se.points.push_back({x, mean, mean - sd, mean + sd});
  }
  if (runs.size() > 1) se.title += fmt::format(" ({} seeds)", runs.size());
  return se;
}

}  // namespace

Figure quality_per_token(const ResultSet& results, const TableSpec& spec, const PlotSpec& plot, size_t index,
                         const std::string& out_dir, const std::string& gnuplot) {
  Panel p;
  p.title =
      fmt::format("{}: {} against training tokens since the teacher", results.experiment().name, plot.metric.units());
  p.xlabel = "training tokens of the conversion (all its stages)";
  p.ylabel = plot.metric.units();
  p.logx = true;
  std::vector<std::string> order;
  std::map<std::string, std::vector<const JobRecord*>> cells;  // seeds of one cell pooled
  for (const auto* j : table_jobs(results, spec)) {
    const auto label = series_label(spec, *j, plot.series);
    if (!cells.count(label)) order.push_back(label);
    cells[label].push_back(j);
  }
  for (const auto& label : order) p.series.push_back(cell_series(results, spec, plot, cells[label], label));
  for (const auto& ref : spec.references) {
    const auto r = reference_jobs(results, spec, ref);
    const auto c = reduce_cell(r.jobs, plot.metric, results, r.reduce, 6);
    if (c.kind != CellValue::Kind::Value) continue;
    Series level;
    level.title = ref.label, level.horizontal = true;
    level.points.push_back({0, c.mean, c.mean, c.mean});
    p.series.push_back(std::move(level));
  }
  return render({p}, fmt::format("vs_tokens{}", index ? fmt::format("_{}", index) : ""), out_dir, gnuplot);
}

}  // namespace fwlab::plotting
