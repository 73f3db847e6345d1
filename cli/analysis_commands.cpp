// The commands that read an experiment file and the database: `fwlab table`, `report` and `plot`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <functional>

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

// The analysis commands read the file (with its profile) and the database; `body` gets both.
int with_results(const std::string& file, const std::string& profile, const Common& c,
                 const std::function<int(const ResultSet&, const TableSpec&, const std::vector<PlotSpec>&)>& body) {
  try {
    const auto ex = plan_checked(file, profile, c).ex;
    const auto table = table_spec(ex);
    const auto plots = plot_specs(ex, table);
    published_spec(ex, table);  // checked by every analysis command, as [table] and [[plot]] are
    if (!fs::exists(c.db_path)) {
      fmt::print(stderr, "fwlab: --db {}: no results database there (run `fwlab sweep {}{}` first)\n", c.db_path, file,
                 experiment_args(profile, c));
      return 2;
    }
    Db db(c.db_path, true);
    const ResultSet results(ex, profile, db, FWLAB_SOURCE_DIR, kFwlabVersion);
    return body(results, table, plots);
  } catch (const ExperimentError& e) {  // the file's own errors, including those planning its jobs finds
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  }
}

}  // namespace

int cmd_table(const std::string& file, const std::string& profile, const std::string& format, bool compare,
              const std::string& out, const Common& c) {
  if (compare && format != "md")
    throw ArgumentError("--compare: the comparison is Markdown only (drop --format " + format + ")");
  return with_results(
      file, profile, c, [&](const ResultSet& results, const TableSpec& spec, const std::vector<PlotSpec>&) {
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
          return emit(render_comparison(compare_with_published(t, *published)), out);
        }
        return emit(format == "tex" ? render_latex(t) : format == "csv" ? render_csv(t) : render_markdown(t), out);
      });
}

int cmd_report(const std::string& file, const std::string& profile, const std::string& out, const Common& c) {
  return with_results(file, profile, c, [&](const ResultSet& results, const TableSpec&, const std::vector<PlotSpec>&) {
    return emit(divergence_report(results), out);
  });
}

int cmd_plot(const std::string& file, const std::string& profile, const std::string& out, const std::string& gnuplot,
             const Common& c) {
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
