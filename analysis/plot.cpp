#include "analysis/plot.h"
#include "analysis/gnuplot.h"
#include "analysis/passkey_plot.h"
#include "analysis/plot_panels.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "analysis/table.h"
#include "contract/job/job_status.h"

namespace fs = std::filesystem;

namespace fwlab {

// A gnuplot string literal that stays text whatever it holds. Experiment files and databases are shared, so
// their strings must never become commands: gnuplot runs `...` inside double quotes as a shell command and
// starts a new command after a newline. Single-quoted strings expand nothing (a quote is written twice),
// and control characters become spaces. `text` ones are shown in enhanced mode, where \ _ ^ @ & { } are
// markup: a backslash before each keeps it literal.
std::string gp_quote(const std::string& s, bool text) {
  std::string out = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += ' ';
      continue;
    }
    if (c == '\'') out += '\'';
    if (text && (c == '\\' || c == '@' || c == '^' || c == '_' || c == '&' || c == '{' || c == '}')) out += '\\';
    out += c;
  }
  return out + "'";
}

std::string safe_name(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    const char kept = std::isalnum(c) || c == '-' ? static_cast<char>(c) : '_';
    if (kept != '_' || out.empty() || out.back() != '_') out += kept;  // a run of replaced characters: one '_'
  }
  return out;
}

// Runs `program script` in `dir` with stdout and stderr to `log` (relative to `dir`), without a shell: no
// name or path reaches an interpreter. Returns the exit code, 127 when the program cannot be started.
int run_in(const std::string& dir, const std::string& program, const std::string& script, const std::string& log) {
  const auto exe = program.find('/') == std::string::npos ? program : fs::absolute(program).string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void write_and_run(const std::string& script, const std::string& name, const std::string& out_dir,
                   const std::string& gnuplot) {
  if (gnuplot.empty()) return;  // names only (fwlab plot --list): nothing written, nothing run
  const auto gp = fs::path(out_dir) / (name + ".gp");
  {
    std::ofstream f(gp);
    f << script;
    if (!f) throw PlotError(fmt::format("cannot write {}", gp.string()));
  }
  const auto log = fs::path(out_dir) / (name + ".gnuplot.log");
  // The script names its outputs relative to its own directory, so the figure files sit beside it.
  const int rc = run_in(fs::absolute(out_dir).string(), gnuplot, gp.filename().string(), log.filename().string());
  std::ifstream lf(log);
  std::string messages((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
  fs::remove(log);
  if (rc == 127)
    throw PlotError(
        fmt::format("'{}' not found: install gnuplot (Debian: gnuplot-nox; scripts/setup.sh does)", gnuplot));
  if (rc != 0) throw PlotError(fmt::format("gnuplot failed on {}: {}", gp.string(), messages));
}

namespace plotting {

std::string fmt_g(double v) { return fmt::format("{:.10g}", v); }

// Where the markers of runs without a value go: above every real value (and error bar) of the panel.
std::optional<double> marker_level(const Panel& p) {
  double top = -INFINITY, bottom = INFINITY;
  for (const auto& se : p.series)
    for (const auto& pt : se.points)
      if (std::isfinite(pt[1]))
        top = std::max(top, std::max(pt[1], pt[3])), bottom = std::min(bottom, std::min(pt[1], pt[2]));
  if (!std::isfinite(top)) return std::nullopt;
  return p.logy ? top * 1.25 : top + 0.08 * std::max(top - bottom, std::fabs(top) * 0.05 + 1e-12);
}

// The panel's data as inline blocks ($PREFIXi per series, $PREFIXid for its no-value markers); gnuplot needs them
// before the plot commands.
std::string data_blocks(const Panel& p, const std::string& prefix) {
  std::ostringstream s;
  const auto mark_y = marker_level(p);
  for (size_t i = 0; i < p.series.size(); ++i) {
    const auto& se = p.series[i];
    s << "$" << prefix << i << " << EOD\n";
    for (const auto& pt : se.points)
      s << fmt_g(pt[0]) << ' ' << fmt_g(pt[1]) << ' ' << fmt_g(pt[2]) << ' ' << fmt_g(pt[3]) << '\n';
    s << "EOD\n";
    if (se.diverged_x.empty() || !mark_y) continue;
    s << "$" << prefix << i << "d << EOD\n";
    for (double x : se.diverged_x) s << fmt_g(x) << ' ' << fmt_g(*mark_y) << '\n';
    s << "EOD\n";
  }
  return s.str();
}

std::string panel_plot(const Panel& p, const std::string& prefix) {
  std::ostringstream s;
  std::set<double> xs;
  for (const auto& se : p.series) {
    for (const auto& pt : se.points)
      if (!se.horizontal) xs.insert(pt[0]);
    xs.insert(se.diverged_x.begin(), se.diverged_x.end());
  }
  s << "unset arrow\nunset label\n";
  s << "set title " << gp_quote(p.title) << "\nset xlabel " << gp_quote(p.xlabel) << "\nset ylabel "
    << gp_quote(p.ylabel) << "\n";
  s << (p.logx ? "set logscale x 2\n" : "unset logscale x\n") << (p.logy ? "set logscale y\n" : "unset logscale y\n");
  if (p.xtics_at_points && !xs.empty()) {
    std::vector<std::string> tics;
    for (double x : xs) tics.push_back(fmt_g(x));
    s << "set xtics (" << fmt::format("{}", fmt::join(tics, ", ")) << ")\n";
    s << fmt::format("set xrange [{}:{}]\n", fmt_g(*xs.begin() / (p.logx ? 1.4 : 1.0)),
                     fmt_g(*xs.rbegin() * (p.logx ? 1.4 : 1.0)));
  } else {
    // From step 0 (slightly left of it, so a marker at 0 is not hidden by the border).
    s << "set xtics autofreq\n"
      << (p.x_from_zero ? fmt::format("set xrange [{}:*]\n", fmt_g(xs.empty() ? 0.0 : -0.02 * *xs.rbegin()))
                        : "set autoscale x\n");
  }
  // Runs with no value are drawn at the top of the plot, above every real value, so they cannot be missed.
  const bool any_diverged =
      std::any_of(p.series.begin(), p.series.end(), [](const Series& se) { return !se.diverged_x.empty(); });
  const auto mark_y = marker_level(p);
  if (any_diverged && mark_y)
    s << fmt::format("set yrange [*:{}]\n", fmt_g(p.logy ? *mark_y * 1.15 : *mark_y * 1.02 + 1e-9));
  else
    s << "set autoscale y\n";
  int markers = 0;
  for (size_t i = 0; i < p.series.size(); ++i)
    if (p.series[i].marker_x) {
      const auto x = fmt_g(*p.series[i].marker_x);
      s << fmt::format("set arrow from {}, graph 0 to {}, graph 1 nohead dt 2 lw 2 lc {}\n", x, x, i + 1);
      s << fmt::format("set label {} at {}, graph {} left offset 0.5, 0 tc lt {}\n", gp_quote("× diverged"), x,
                       fmt_g(0.95 - 0.05 * markers++), i + 1);
    }
  std::vector<std::string> parts;
  for (size_t i = 0; i < p.series.size(); ++i) {
    const auto& se = p.series[i];
    const auto lc = fmt::format("lc {}", i + 1);
    // gnuplot's eight colours come round again from the ninth series: those lines are dashed, to tell them apart.
    const char* dash = se.dashed || i >= 8 ? "dt 2" : "dt 1";
    if (se.horizontal && !se.points.empty()) {
      parts.push_back(fmt::format("{} w l dt 3 lw 2 {} t {}", fmt_g(se.points[0][1]), lc, gp_quote(se.title)));
    } else if (se.points.empty()) {  // still in the legend: a run with no value is shown, not dropped
      parts.push_back(fmt::format("keyentry w l {} lw 2 {} t {}", dash, lc, gp_quote(se.title)));
    } else {
      const bool spread = std::any_of(se.points.begin(), se.points.end(),
                                      [](const auto& pt) { return pt[2] != pt[1] || pt[3] != pt[1]; });
      const bool bars = spread && !se.band;
      if (spread && se.band)
        parts.push_back(
            fmt::format("${}{} u 1:3:4 w filledcurves fs transparent solid 0.2 noborder {} notitle", prefix, i, lc));
      parts.push_back(fmt::format("${}{} u 1:2{} w {} {} lw 2 pt 7 ps 0.8 {} t {}", prefix, i, bars ? ":3:4" : "",
                                  bars ? "yerrorlines" : "linespoints", dash, lc, gp_quote(se.title)));
    }
    if (!se.diverged_x.empty() && mark_y)
      parts.push_back(fmt::format("${}{}d u 1:2 w p pt 2 ps 2.5 lw 3 {} t {}", prefix, i, lc,
                                  gp_quote(se.title + ": diverged (no value)")));
  }
  const bool any_points =
      std::any_of(p.series.begin(), p.series.end(), [](const Series& se) { return !se.points.empty(); });
  if (!any_points) {  // gnuplot refuses a plot without data: fixed ranges and a note instead
    double right = 1;
    for (const auto& se : p.series)
      if (se.marker_x) right = std::max(right, *se.marker_x + 1);
    s << fmt::format(
        "set xrange [0:{}]\nset yrange [0:1]\nunset logscale y\nset label 'no values recorded' at graph 0.5, graph 0.5 "
        "center\n",
        fmt_g(right));
    parts.push_back("1/0 notitle");
  }
  s << "plot " << fmt::format("{}", fmt::join(parts, ", \\\n     ")) << "\n";
  return s.str();
}

// Tall enough for every legend entry in one column: where they do not fit, gnuplot adds key columns to the right
// until they squeeze the plot itself to a sliver (a 48-run MQAR figure did). 600 px holds about 30 entries.
namespace {
constexpr int kLegendEntryPixels = 16;  // a key line at DejaVu Sans 10 with its spacing
int figure_height(const std::vector<Panel>& panels) {
  size_t entries = 0;
  for (const auto& p : panels) entries = std::max(entries, p.series.size());
  return std::max(600, 120 + kLegendEntryPixels * static_cast<int>(entries));
}
}  // namespace

// Writes NAME.gp and renders it to NAME.png and NAME.svg.
Figure render(const std::vector<Panel>& panels, const std::string& name, const std::string& out_dir,
              const std::string& gnuplot) {
  std::string data, body;
  for (size_t k = 0; k < panels.size(); ++k) {
    const auto prefix = fmt::format("p{}s", k);
    data += data_blocks(panels[k], prefix);
    body += panel_plot(panels[k], prefix);
  }
  const int width = panels.size() > 1 ? 1600 : 1100;  // the legend beside each panel, right of it
  const int height = figure_height(panels);
  const auto frame = [&](const std::string& terminal, const std::string& file) {
    std::string s = fmt::format("set terminal {}\nset output {}\n", terminal, gp_quote(file, false));
    if (panels.size() > 1) s += fmt::format("set multiplot layout 1,{}\n", panels.size());
    s += body;
    if (panels.size() > 1) s += "unset multiplot\n";
    return s + "unset output\n";
  };
  std::string script = "# Generated by fwlab plot. Data inline; run `gnuplot NAME.gp` to redraw.\n";
  script +=
      "set encoding utf8\nset grid\nset key outside right top vertical Left reverse box\nset xlabel offset 0, 0.3\nset "
      "border lw 1.2\n" +
      data;
  script += frame(fmt::format("pngcairo size {},{} enhanced font 'DejaVu Sans,10'", width, height), name + ".png");
  script += frame(fmt::format("svg size {},{} enhanced font 'DejaVu Sans,10' dynamic", width, height), name + ".svg");
  write_and_run(script, name, out_dir, gnuplot);
  Figure fig{name, {}};
  for (const auto& p : panels)
    for (const auto& se : p.series) fig.series.push_back(se.title);
  return fig;
}

std::string series_label(const TableSpec& spec, const JobRecord& j, const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  for (const auto& n : names) {
    auto v = job_value(j, n);
    if (v.is_null() && n == "rule") v = job_value(j, "mixer");  // softmax / local / sru have no rule
    const auto text = value_text(v);
    parts.push_back(v.is_null() ? "(none)" : spec.axis_value(n, text, v.is_string()));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<const JobRecord*> table_jobs(const ResultSet& results, const TableSpec& spec) {
  std::vector<const JobRecord*> out;
  for (const auto& j : results.jobs())
    if (j.planned.applicable && std::find(spec.stages.begin(), spec.stages.end(), j.stage()) != spec.stages.end())
      out.push_back(&j);
  return out;
}

// Validation curves, one figure per group (the table's rows, or its columns), one line per run of the group;
// `others` are the axes that tell a group's runs apart, `prefix` names the files (PREFIX_KEY).
std::vector<Figure> curve_figures(const ResultSet& results, const TableSpec& spec,
                                  const std::vector<std::string>& group, const std::vector<std::string>& others,
                                  const std::string& prefix, const std::string& out_dir, const std::string& gnuplot) {
  const auto eval_metric = std::find_if(spec.metrics.begin(), spec.metrics.end(),
                                        [](const Metric& m) { return m.source == Metric::Source::Eval; });
  if (eval_metric == spec.metrics.end()) return {};
  const auto valid = parse_metric("valid_" + eval_metric->field);
  // Rows are grouped by their values (two rows may share a label, as Mao's Table 2 "Gated" at m = 16 and 32).
  std::vector<std::string> order;
  std::map<std::string, std::vector<const JobRecord*>> rows;
  std::map<std::string, std::string> shown_as;
  for (const auto* j : table_jobs(results, spec)) {
    std::vector<std::string> raw;
    for (const auto& r : group) raw.push_back(value_text(job_value(*j, r)));
    const auto key = group.empty() ? std::string("all") : fmt::format("{}", fmt::join(raw, "_"));
    if (!rows.count(key)) order.push_back(key), shown_as[key] = group.empty() ? "" : series_label(spec, *j, group);
    rows[key].push_back(j);
  }
  // Runs told apart by nothing but their row: one figure, one line per row.
  std::vector<std::vector<std::string>> figure_rows;
  if (others.empty())
    figure_rows.push_back(order);
  else
    for (const auto& key : order) figure_rows.push_back({key});
  std::vector<Figure> figures;
  for (const auto& keys : figure_rows) {
    const auto& label = keys.size() == 1 ? shown_as[keys[0]] : std::string();
    Panel p;
    p.title = fmt::format("{}{} — {} during training", results.experiment().name,
                          label.empty()      ? ""
                          : label == keys[0] ? ": " + label
                                             : fmt::format(": {} ({})", label, keys[0]),
                          valid.units());
    p.xlabel = "training step";
    p.ylabel = valid.units();
    p.x_from_zero = true;  // a run that diverged at step 0 is marked there
    for (const auto& key : keys)
      for (const auto* j : rows[key]) {
        if ((!j->status && j->planned.applicable) || j->status == JobStatus::pending) continue;  // not run yet
        Series se;
        const auto& row_label = shown_as[key];
        se.title = !others.empty()     ? series_label(spec, *j, others)
                   : row_label.empty() ? results.experiment().name
                   : std::count_if(order.begin(), order.end(),
                                   [&](const std::string& k) { return shown_as[k] == row_label; }) > 1
                       ? fmt::format("{} ({})", row_label, key)
                       : row_label;
        for (const auto& e : j->evals) {
          if (e.split != "valid") continue;
          const auto& v = e.field(valid.field);
          if (v && std::isfinite(*v)) se.points.push_back({static_cast<double>(e.step), *v, *v, *v});
        }
        if (j->diverged()) {
          const auto step = j->divergence ? j->divergence->step : 0;
          se.title +=
              fmt::format(" — diverged at step {}{}", step, j->divergence ? " (" + j->divergence->cause + ")" : "");
          se.dashed = true;
          se.marker_x = static_cast<double>(step);
        } else if (!j->finished()) {
          se.title += fmt::format(" ({})", j->status_text());
        }
        p.series.push_back(std::move(se));
      }
    if (p.series.empty()) continue;
    figures.push_back(render({p}, keys.size() == 1 ? prefix + "_" + safe_name(keys[0]) : prefix, out_dir, gnuplot));
  }
  return figures;
}

// One figure per table row (the runs of its columns and reduced axes), and where the table has both rows and
// columns, one per column (the runs of its rows and reduced axes): a column's cells side by side.
std::vector<Figure> learning_curves(const ResultSet& results, const TableSpec& spec, const std::string& out_dir,
                                    const std::string& gnuplot) {
  std::vector<std::string> others = spec.columns;  // what tells the runs of a row apart
  for (const auto& [axis, how] : spec.reduce) others.push_back(axis);
  auto figures = curve_figures(results, spec, spec.rows, others, "curves", out_dir, gnuplot);
  if (spec.rows.empty() || spec.columns.empty()) return figures;
  std::vector<std::string> by_row = spec.rows;
  for (const auto& [axis, how] : spec.reduce) by_row.push_back(axis);
  for (auto& f : curve_figures(results, spec, spec.columns, by_row, "curves_column", out_dir, gnuplot))
    figures.push_back(std::move(f));
  return figures;
}

// The metric against an axis (plot.x: m for vs_m, any grid axis for versus), one line per series.
Figure versus(const ResultSet& results, const TableSpec& spec, const PlotSpec& plot, size_t index,
              const std::string& out_dir, const std::string& gnuplot) {
  const bool state_size = plot.x == "m";
  Panel p;
  p.title = state_size
                ? fmt::format("{}: {} vs state size m", results.experiment().name, plot.metric.units())
                : fmt::format("{}: {} vs {}", results.experiment().name, plot.metric.units(), spec.label(plot.x));
  p.xlabel = state_size ? "m (feature / key dimension of the state, per head)" : spec.label(plot.x);
  p.ylabel = plot.metric.units();
  p.logx = true;
  p.xtics_at_points = true;
  std::vector<std::string> order;
  std::map<std::string, std::map<double, std::vector<const JobRecord*>>> groups;  // series -> x -> jobs
  std::map<std::string, std::vector<const JobRecord*>> levels;                    // series without x
  for (const auto* j : table_jobs(results, spec)) {
    const auto label = series_label(spec, *j, plot.series);
    const auto x = job_value(*j, plot.x);
    if (!groups.count(label) && !levels.count(label)) order.push_back(label);
    if (x.is_number())
      groups[label][x.get<double>()].push_back(j);
    else
      levels[label].push_back(j);
  }
  for (const auto& label : order) {
    Series se;
    se.title = label;
    if (groups.count(label)) {
      for (const auto& [x, jobs] : groups[label]) {
        const auto c = reduce_cell(jobs, plot.metric, results, spec.reduce, 6);
        if (c.kind == CellValue::Kind::Value)
          se.points.push_back({x, c.mean, c.mean - c.sd, c.mean + c.sd});
        else if (c.kind == CellValue::Kind::Diverged)
          se.diverged_x.push_back(x);
      }
    } else {
      const auto c = reduce_cell(levels[label], plot.metric, results, spec.reduce, 6);
      if (c.kind != CellValue::Kind::Value) continue;
      se.horizontal = true;
      se.title += fmt::format(" (no {}: reference level)", plot.x);
      se.points.push_back({0, c.mean, c.mean, c.mean});
    }
    p.series.push_back(std::move(se));
  }
  // The table's references (the teacher, a softmax baseline): a line when their stage runs along x too (the
  // softmax model at each number of pairs), else a level to compare with.
  for (const auto& ref : spec.references) {
    const auto along = reference_jobs(results, spec, ref, {plot.x});
    std::map<double, std::vector<const JobRecord*>> by_x;
    for (const auto* j : along.jobs)
      if (const auto x = job_value(*j, plot.x); x.is_number()) by_x[x.get<double>()].push_back(j);
    Series se;
    se.title = ref.label;
    se.dashed = true;  // told apart from the rows' lines even when the colours cycle round
    for (const auto& [x, jobs] : by_x) {
      const auto c = reduce_cell(jobs, plot.metric, results, along.reduce, 6);
      if (c.kind == CellValue::Kind::Value) se.points.push_back({x, c.mean, c.mean - c.sd, c.mean + c.sd});
    }
    if (by_x.empty()) {
      const auto r = reference_jobs(results, spec, ref);
      const auto c = reduce_cell(r.jobs, plot.metric, results, r.reduce, 6);
      if (c.kind != CellValue::Kind::Value) continue;
      se.title += " (reference level)";
      se.horizontal = true;
      se.points.push_back({0, c.mean, c.mean, c.mean});
    }
    p.series.push_back(std::move(se));
  }
  return render({p}, fmt::format("vs_{}{}", safe_name(plot.x), index ? fmt::format("_{}", index) : ""), out_dir,
                gnuplot);
}

Figure generation(const ResultSet& results, const TableSpec& spec, const PlotSpec& plot, const std::string& out_dir,
                  const std::string& gnuplot) {
  Panel time, memory;
  time.title = fmt::format("{}: time per generated token", results.experiment().name);
  time.xlabel = memory.xlabel = "sequence length so far (tokens)";
  time.ylabel = "ms per generated token (median; bars: min–max)";
  memory.title = fmt::format("{}: memory carried between tokens", results.experiment().name);
  memory.ylabel = "state memory (MiB: KV cache or fast-weight state)";
  time.logx = memory.logx = memory.logy = true;
  time.xtics_at_points = memory.xtics_at_points = true;
  for (const auto* j : table_jobs(results, spec)) {
    Series t, m;
    t.title = m.title = series_label(spec, *j, plot.series);
    if (!j->finished()) {
      t.title += fmt::format(" ({})", j->status_text());
      m.title = t.title;
    }
    const auto& ms = results.series(j->id(), "gen_ms_per_token");
    const auto& lo = results.series(j->id(), "gen_ms_per_token_min");
    const auto& hi = results.series(j->id(), "gen_ms_per_token_max");
    for (const auto& [L, v] : ms)
      t.points.push_back({static_cast<double>(L), v, lo.count(L) ? lo.at(L) : v, hi.count(L) ? hi.at(L) : v});
    for (const auto& [L, v] : results.series(j->id(), "gen_state_bytes")) {
      const double mib = v / (1024.0 * 1024.0);
      m.points.push_back({static_cast<double>(L), mib, mib, mib});
    }
    time.series.push_back(std::move(t));
    memory.series.push_back(std::move(m));
  }
  return render({time, memory}, "generation", out_dir, gnuplot);
}

}  // namespace plotting

using namespace plotting;

std::vector<Figure> make_plots(const ResultSet& results, const TableSpec& table, const std::vector<PlotSpec>& plots,
                               const std::string& out_dir, const std::string& gnuplot) {
  std::error_code ec;
  if (!gnuplot.empty()) fs::create_directories(out_dir, ec);
  if (ec) throw PlotError(fmt::format("cannot create {}: {}", out_dir, ec.message()));
  auto figures = learning_curves(results, table, out_dir, gnuplot);
  for (size_t i = 0; i < plots.size(); ++i) {
    if (plots[i].kind == "generation")
      figures.push_back(generation(results, table, plots[i], out_dir, gnuplot));
    else if (plots[i].kind == "vs_tokens")
      figures.push_back(quality_per_token(results, table, plots[i], i, out_dir, gnuplot));
    else
      figures.push_back(versus(results, table, plots[i], i, out_dir, gnuplot));
  }
  for (auto& f : passkey_heatmaps(results, table, out_dir, gnuplot)) figures.push_back(std::move(f));
  return figures;
}

}  // namespace fwlab
