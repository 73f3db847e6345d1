// The commands that read an experiment file and the database: `fwlab table`, `report` and `plot`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <unistd.h>

#include <functional>
#include <optional>

#include "analysis/compare.h"
#include "analysis/plot.h"
#include "analysis/report.h"
#include "analysis/table.h"
#include "cli/commands.h"
#include "cli/planning.h"
#include "contract/version.h"

namespace fwlab::cli {

namespace fs = std::filesystem;

namespace {

// When the database holds none of the jobs this file, profile and --set plan (a table of "–" that is a mistake,
// not a sweep still to run): what it does hold of the experiment, as the sweeps that ran it were called.
std::optional<std::string> why_empty(Db& db, const ResultSet& results, const std::string& file,
                                     const std::string& profile, const Common& c) {
  for (const auto& j : results.jobs())
    if (j.status) return std::nullopt;
  const auto& name = results.experiment().name;
  auto q = db.prepare(
      "SELECT s.command, COUNT(DISTINCT sj.job_id) FROM sweeps s JOIN sweep_jobs sj ON sj.sweep_id = s.id "
      "WHERE s.experiment = ? GROUP BY s.command ORDER BY MAX(s.id)");
  q.bind(1, name);
  std::string held;
  while (q.step()) held += fmt::format("  fwlab {}   ({} jobs)\n", q.text(0), q.integer(1));
  const auto asked = fmt::format("{}{}", file, experiment_args(profile, c));
  if (held.empty())
    return fmt::format("fwlab: {} holds no job of experiment '{}' (run `fwlab sweep {}` first)\n", c.db_path, name,
                       asked);
  return fmt::format(
      "fwlab: {} holds none of the jobs of `{}` (profile and --set select the jobs); it holds '{}' from:\n{}"
      "give the same --profile and --set as the sweep\n",
      c.db_path, asked, name, held);
}

// The analysis commands read the file (with its profile) and the database; `body` gets both.
int with_results(const std::string& file, const std::string& profile, const Common& c,
                 const std::function<int(const ResultSet&, const TableSpec&, const std::vector<PlotSpec>&)>& body,
                 const std::string& table_name = "") {
  try {
    const auto ex = plan_checked(file, profile, c, false).ex;
    const auto table = table_spec(ex, table_name);
    const auto plots = plot_specs(ex, table);
    published_spec(ex, table);  // checked by every analysis command, as [table] and [[plot]] are
    if (!fs::exists(c.db_path)) {
      fmt::print(stderr, "fwlab: --db {}: no results database there (run `fwlab sweep {}{}` first)\n", c.db_path, file,
                 experiment_args(profile, c));
      return 2;
    }
    Db db(c.db_path, true);
    const ResultSet results(ex, profile, db, FWLAB_SOURCE_DIR, kFwlabVersion);
    if (const auto empty = why_empty(db, results, file, profile, c)) {
      fmt::print(stderr, "{}", *empty);
      return 1;
    }
    return body(results, table, plots);
  } catch (const ExperimentError& e) {  // the file's own errors, including those planning its jobs finds
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  }
}

}  // namespace

int cmd_table(const std::string& file, const std::string& profile, const std::string& format, bool compare,
              const std::string& out, const std::string& table_name, const Common& c) {
  if (compare && !table_name.empty())
    throw ArgumentError("--compare: the paper's numbers stand beside [table], not a further table (drop --table)");
  if (compare && format != "md")
    throw ArgumentError("--compare: the comparison is Markdown only (drop --format " + format + ")");
  return with_results(
      file, profile, c,
      [&](const ResultSet& results, const TableSpec& spec, const std::vector<PlotSpec>&) {
        const auto t = build_table(results, spec);
        if (compare) {
          const auto published = published_spec(results.experiment(), spec);
          if (!published) {
            fmt::print(
                stderr,
                "fwlab: {}: --compare: the file has no [published] section (the paper's numbers) to compare with\n",
                file);
            return 2;
          }
          const auto comparison = compare_with_published(t, *published);
          if (comparison.ranked == 0) {  // a page of "– / 80.9" compares nothing: say so instead of writing it
            fmt::print(stderr,
                       "fwlab: {}: --compare: no cell has both a value here and the paper's{}: nothing to compare "
                       "(the paper's columns may be measured at another profile)\n",
                       file, profile.empty() ? "" : fmt::format(" at profile {}", profile));
            return 1;
          }
          auto text = render_comparison(comparison);
          // The catalog's smoke profiles train a few steps on toy models: their orderings measure the pipeline.
          if (profile == "smoke")
            text +=
                "\nCaveat: these are smoke-profile runs (a few steps on toy models, to test the pipeline): their "
                "orderings and rank correlation say nothing about the paper; compare at the quick or paper "
                "profile.\n";
          return emit(text, out);
        }
        return emit(format == "tex" ? render_latex(t) : format == "csv" ? render_csv(t) : render_markdown(t), out);
      },
      table_name);
}

int cmd_report(const std::string& file, const std::string& profile, const std::string& out, const Common& c) {
  return with_results(file, profile, c, [&](const ResultSet& results, const TableSpec&, const std::vector<PlotSpec>&) {
    return emit(divergence_report(results), out);
  });
}

namespace {

// Every job finished, every metric 0: derived cells planned as if their inputs had ended (their names are what
// counts here, not their values).
struct EveryJobFinished : JobResults {
  std::optional<JobStatus> status(const std::string&) const override { return JobStatus::finished; }
  std::optional<double> value(const std::string&, const std::string&) const override { return 0.0; }
};

// `fwlab plot --list`: the figures the file's jobs make once every one has run (one name a line), from the file
// alone; a scratch database stands in for the results.
int list_figures(const std::string& file, const std::string& profile, const Common& c) {
  try {
    const auto ex = load_experiment(file, profile, c.sets);
    const auto table = table_spec(ex);
    const auto plots = plot_specs(ex, table);
    const auto scratch = fs::temp_directory_path() / fmt::format("fwlab-plot-list-{}.db", ::getpid());
    std::vector<std::string> names;
    {
      Db db(scratch.string());
      const EveryJobFinished every;
      ResultSet results(ex, profile, db, FWLAB_SOURCE_DIR, kFwlabVersion, &every);
      results.assume_all_finished();
      for (const auto& f : make_plots(results, table, plots, "", "")) names.push_back(f.name);
    }
    for (const auto* suffix : {"", "-wal", "-shm"}) fs::remove(scratch.string() + suffix);
    for (const auto& n : names) fmt::print("{}\n", n);
    return 0;
  } catch (const ExperimentError& e) {
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  }
}

}  // namespace

int cmd_plot(const std::string& file, const std::string& profile, const std::string& out, const std::string& gnuplot,
             bool list, const Common& c) {
  if (list) return list_figures(file, profile, c);
  return with_results(
      file, profile, c, [&](const ResultSet& results, const TableSpec& spec, const std::vector<PlotSpec>& plots) {
        const auto dir =
            out.empty() ? (fs::path(c.db_path).parent_path() / results.experiment().name / "plots").string() : out;
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec || !fs::is_directory(dir))
          throw ArgumentError(
              fmt::format("--out {}: cannot create the folder: {}", dir, ec ? ec.message() : "not a folder"));
        try {
          for (const auto& f : make_plots(results, spec, plots, dir, gnuplot))
            fmt::print("{}/{}.png (.svg, .gp): {}\n", dir, f.name, fmt::join(f.series, "; "));
        } catch (const PlotError& e) {
          fmt::print(stderr, "fwlab: plot: {}\n", e.what());
          return 1;
        }
        return 0;
      });
}

}  // namespace fwlab::cli
