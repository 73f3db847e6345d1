// fwlab table / report / plot on a database the test writes itself: every value below is recomputed here from
// the numbers the test put in, not read back from fwlab.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "analysis/compare.h"
#include "analysis/markdown.h"
#include "analysis/plot_panels.h"
#include "analysis/report.h"
#include "analysis/site.h"
#include "analysis/table.h"
#include "harness/db.h"
#include "harness/plan.h"
#include "tests/test_support.h"

using namespace fwlab;
using fwlab::test::fwlab_cmd;
namespace fs = std::filesystem;

namespace {

// rule x m x lr x seed; decay at m = 4 does not apply. Line numbers matter to the error tests below.
const std::string kGrid = R"([experiment]
name = "grid"
description = "analysis test grid"
[defaults]
seed = 0
[defaults.data]
source = "mqar"
[defaults.model]
vocab = 256
d_model = 16
n_layers = 1
n_heads = 1
head_dim = 16
context = 64
[defaults.train]
steps = 10
[stage.train]
mixer = "fast_weight"
feature_map = "identity"
norm = "none"
[grid]
rule = ["add", "delta", "gated", "decay"]
m = [4, 16]
lr = [1e-3, 1e-2]
seed = [0, 1]
[[not_applicable]]
rule = "decay"
m = 4
[table]
rows = ["rule"]
columns = ["m"]
metric = "test_ppl"
reduce = { lr = "best", seed = "mean" }
[[plot]]
kind = "vs_m"
series = ["rule"]
)";

std::string grid_with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// "grid.toml:LINE:" of the line where `needle` starts in `text`.
std::string line_of(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  REQUIRE(at != std::string::npos);
  return fmt::format("grid.toml:{}:", 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
}

// The head of a made-up paper's table for --compare, up to its add row.
const std::string kPublishedHead = R"(
[published]
source = "Made up 2026, Table 9"
better = "lower"
columns = ["4", "16"]
[published.rows]
add = [9.0, 14.0])";

// Test perplexity of a finished add / delta run: lr 1e-2 is better by 1, seed 1 worse by 0.5.
double add_ppl(int64_t m, double lr, int64_t seed) {
  return 10.0 + static_cast<double>(m) / 4 - (lr > 5e-3 ? 1.0 : 0.0) + 0.5 * static_cast<double>(seed);
}

struct Fixture {
  test::TempDir dir{"analysis"};
  std::string file = dir.file("grid.toml"), db_path = dir.file("fwlab.db");

  explicit Fixture(const std::string& text = kGrid) {
    test::spit(file, text);
    const auto jobs = plan_jobs(load_experiment(file, ""), FWLAB_SOURCE_DIR, kFwlabVersion);
    Db db(db_path);
    auto job = db.prepare(
        "INSERT INTO jobs(id, experiment, stage, coords, config, status, cause, reason) VALUES(?, 'grid', ?, ?, ?, ?, "
        "?, ?)");
    auto ev = db.prepare("INSERT INTO evals(job_id, split, step, checkpoint, loss, ppl) VALUES(?, ?, ?, ?, ?, ?)");
    auto div = db.prepare(
        "INSERT INTO divergences(job_id, step, cause, value, last_finite_loss, lr, first_nonfinite_layer) "
        "VALUES(?, 7, 'nonfinite_loss', 'nan', 2.5, 0.01, 'blocks.0')");
    const auto finished = [&](const PlannedJob& j, double ppl) {
      job.bind(1, j.id)
          .bind(2, j.stage)
          .bind(3, j.coords.dump())
          .bind(4, j.spec.dump())
          .bind(5, std::string("finished"))
          .bind_null(6)
          .bind_null(7)
          .run();
      for (int64_t step : {5, 10})
        ev.bind(1, j.id)
            .bind(2, std::string("valid"))
            .bind(3, step)
            .bind(4, std::string(""))
            .bind(5, std::log(ppl + 1.0 / step))
            .bind(6, ppl + 1.0 / step)
            .run();
      ev.bind(1, j.id)
          .bind(2, std::string("test"))
          .bind(3, int64_t{10})
          .bind(4, std::string("best"))
          .bind(5, std::log(ppl))
          .bind(6, ppl)
          .run();
    };
    const auto ended = [&](const PlannedJob& j, const std::string& status, const std::string& reason) {
      job.bind(1, j.id)
          .bind(2, j.stage)
          .bind(3, j.coords.dump())
          .bind(4, j.spec.dump())
          .bind(5, status)
          .bind(6, status)
          .bind(7, reason)
          .run();
      if (status == "diverged") {
        ev.bind(1, j.id)
            .bind(2, std::string("valid"))
            .bind(3, int64_t{5})
            .bind(4, std::string(""))
            .bind(5, 2.5)
            .bind(6, std::exp(2.5))
            .run();
        div.bind(1, j.id).run();
      }
    };
    for (const auto& j : jobs) {
      if (!j.applicable) continue;
      const auto rule = j.coords["rule"].get<std::string>();
      const auto m = j.coords["m"].get<int64_t>(), seed = j.coords["seed"].get<int64_t>();
      const auto lr = j.coords["lr"].get<double>();
      if (rule == "add") finished(j, add_ppl(m, lr, seed));
      if (rule == "delta" && m == 4) ended(j, "diverged", "");
      if (rule == "delta" && m == 16) {
        if (lr > 5e-3 && seed == 0)
          ended(j, "diverged", "");
        else
          finished(j, lr > 5e-3 ? 11.0 : 12.0 + 0.5 * static_cast<double>(seed));
      }
      if (rule == "gated" && m == 4 && lr < 5e-3 && seed == 0) ended(j, "running", "");
      if (rule == "decay")
        ended(j, seed == 0 ? "crashed" : "timeout",
              seed == 0 ? "worker crashed: | std::bad_alloc\nat step 3" : "timed out after 60 s");
    }
  }
};

}  // namespace

TEST_CASE("table: accuracy cells that have not left chance are marked, at the threshold", "[analysis]") {
  // The grid's data is MQAR with the default 4 pairs: chance 1/4, marked below 0.25 + 0.1 * 0.75 = 0.325.
  Fixture fx(grid_with(kGrid, "metric = \"test_ppl\"", "metric = \"test_accuracy\"\ndigits = 3"));
  {
    Db db(fx.db_path);
    db.exec(
        "UPDATE evals SET accuracy = CASE WHEN (SELECT json_extract(coords, '$.m') FROM jobs WHERE jobs.id = "
        "evals.job_id) = 4 "
        "THEN 0.324 ELSE 0.326 END WHERE split = 'test'");
  }
  Db db(fx.db_path, true);
  const auto ex = load_experiment(fx.file, "");
  const auto t = build_table(ResultSet(ex, "", db, FWLAB_SOURCE_DIR, kFwlabVersion), table_spec(ex));
  INFO(render_markdown(t));
  CHECK(t.cells[0][0].text == "0.324 ± 0.000 ≈ chance");  // add, m = 4: just under the threshold
  CHECK(t.cells[0][1].text == "0.326 ± 0.000");           // add, m = 16: just over
  CHECK_THAT(render_markdown(t),
             Catch::Contains("≈ chance: within a tenth of the way from chance (1 / pairs; over several MQAR points, "
                             "points / their pairs summed) to perfect recall"));
  CHECK_THAT(render_latex(t), Catch::Contains("0.324 $\\pm$ 0.000 $\\approx$ chance"));

  // With 2 pairs chance is 1/2: the same 0.326 is now at chance too.
  Fixture two(grid_with(grid_with(kGrid, "metric = \"test_ppl\"", "metric = \"test_accuracy\"\ndigits = 3"),
                        "source = \"mqar\"", "source = \"mqar\"\nmqar = { pairs = 2, seq_len = 16 }"));
  {
    Db w(two.db_path);
    w.exec("UPDATE evals SET accuracy = 0.326 WHERE split = 'test'");
  }
  Db db2(two.db_path, true);
  const auto ex2 = load_experiment(two.file, "");
  const auto t2 = build_table(ResultSet(ex2, "", db2, FWLAB_SOURCE_DIR, kFwlabVersion), table_spec(ex2));
  CHECK(t2.cells[0][1].text == "0.326 ± 0.000 ≈ chance");

  // Tested at two points, (16, 2) and (32, 8), a batch each: 2 + 8 queries a pair of sequences, one of 2 and one of 8
  // right by a guess, so chance is 2 / 10 and the mark below 0.2 + 0.1 * 0.8 = 0.28 (1/2 from the first point alone).
  Fixture points(grid_with(grid_with(kGrid, "metric = \"test_ppl\"", "metric = \"test_accuracy\"\ndigits = 3"),
                           "source = \"mqar\"",
                           "source = \"mqar\"\nmqar = { pairs = 2, seq_len = 16, test_points = [[16, 2], [32, 8]] }"));
  {
    Db w(points.db_path);
    w.exec(
        "UPDATE evals SET accuracy = CASE WHEN (SELECT json_extract(coords, '$.m') FROM jobs WHERE jobs.id = "
        "evals.job_id) = 4 THEN 0.279 ELSE 0.281 END WHERE split = 'test'");
  }
  Db db3(points.db_path, true);
  const auto ex3 = load_experiment(points.file, "");
  const auto t3 = build_table(ResultSet(ex3, "", db3, FWLAB_SOURCE_DIR, kFwlabVersion), table_spec(ex3));
  CHECK(t3.cells[0][0].text == "0.279 ± 0.000 ≈ chance");
  CHECK(t3.cells[0][1].text == "0.281 ± 0.000");
}

TEST_CASE("table: values, best-over and mean-over selection, every marker, three formats", "[analysis]") {
  Fixture fx;
  Db db(fx.db_path, true);
  const auto ex = load_experiment(fx.file, "");
  ResultSet results(ex, "", db, FWLAB_SOURCE_DIR, kFwlabVersion);
  const auto t = build_table(results, table_spec(ex));

  // add: lr 1e-2 is best; its two seeds differ by 0.5, so mean = base + 0.25 and sd = 0.5 / sqrt(2).
  const auto mean_sd = [](double a, double b) {
    const double mean = (a + b) / 2;
    return fmt::format("{:.2f} ± {:.2f}", mean, std::sqrt(((a - mean) * (a - mean) + (b - mean) * (b - mean)) / 1.0));
  };
  const auto add4 = mean_sd(add_ppl(4, 1e-2, 0), add_ppl(4, 1e-2, 1)),
             add16 = mean_sd(add_ppl(16, 1e-2, 0), add_ppl(16, 1e-2, 1));
  CHECK(add4 == "10.25 ± 0.35");
  REQUIRE(t.cells.size() == 4);
  CHECK(t.column_headers == std::vector<std::string>{"m=4", "m=16"});
  CHECK(t.cells[0][0].text == add4);
  CHECK(t.cells[0][1].text == add16);
  CHECK(t.cells[1][0].text == "*");             // every delta run at m = 4 diverged
  CHECK(t.cells[1][1].text == "11.00 (*1/4)");  // lr 1e-2 (11.00, one seed) beats lr 1e-3 (12.25); 1 of 4 diverged
  CHECK(t.cells[2][0].text == "…");             // one gated run is running, the rest not started
  CHECK(t.cells[2][1].text == "–");             // not run
  CHECK(t.cells[3][0].text == "N/A");
  CHECK(t.cells[3][1].text == "!");  // crashed and timed out
  CHECK(t.legend.size() == 6);       // every marker but "?"

  const auto md = render_markdown(t);
  CHECK_THAT(md, Catch::Contains("| rule | m=4 | m=16 |\n| :--- | ---: | ---: |\n| add | " + add4 + " | " + add16 +
                                 " |\n| delta | * | 11.00 (*1/4) |\n| gated | … | – |\n| decay | N/A | ! |\n"));
  CHECK_THAT(md, Catch::Contains("Cells: test perplexity (best over lr, mean ± sd over seed)."));
  auto captioned = table_spec(ex);
  captioned.caption = "A caption of its own.";  // a sentence of its own: no second full stop
  CHECK(build_table(results, captioned).caption ==
        "A caption of its own. Cells: test perplexity (best over lr, mean ± sd over seed).");
  CHECK_THAT(md, Catch::Contains("*: every run of the cell diverged") &&
                     Catch::Contains("N/A: the combination does not apply"));
  const auto tex = render_latex(t);
  CHECK_THAT(tex, Catch::Contains("\\begin{tabular}{lrr}\n\\toprule\nrule & m=4 & m=16 \\\\\n\\midrule\n"));
  CHECK_THAT(tex, Catch::Contains("add & 10.25 $\\pm$ 0.35 & 13.25 $\\pm$ 0.35 \\\\\ndelta & * & 11.00 (*1/4) \\\\\n"
                                  "gated & \\dots{} & -- \\\\\ndecay & N/A & ! \\\\\n\\bottomrule\n"));
  CHECK(render_csv(t) ==
        "rule,m=4,m=16\nadd,10.25 ± 0.35,13.25 ± 0.35\ndelta,*,11.00 (*1/4)\ngated,…,–\ndecay,N/A,!\n");

  // Without [table]: the first axis as rows, the others as columns, the metric that fits the data (MQAR:
  // accuracy, which these runs never recorded: "?").
  test::spit(fx.file, kGrid.substr(0, kGrid.find("[table]")));
  const auto ex2 = load_experiment(fx.file, "");
  const auto t2 = build_table(ResultSet(ex2, "", db, FWLAB_SOURCE_DIR, kFwlabVersion), table_spec(ex2));
  INFO(render_markdown(t2));
  REQUIRE(t2.column_headers.size() == 8);
  CHECK(t2.column_headers[0] == "m=4, lr=0.001, seed=0");
  CHECK(t2.cells[0][0].text == "?");
  CHECK(t2.cells[3][0].text == "N/A");
  CHECK_THAT(render_markdown(t2),
             Catch::Contains("Cells: test accuracy.") && Catch::Contains("?: finished without this metric"));

  // Decimals per metric.
  test::spit(fx.file, grid_with(kGrid, "metric = \"test_ppl\"", "metric = \"test_ppl\"\ndigits = { test_ppl = 3 }"));
  const auto ex3 = load_experiment(fx.file, "");
  const auto t3 = build_table(ResultSet(ex3, "", db, FWLAB_SOURCE_DIR, kFwlabVersion), table_spec(ex3));
  CHECK(t3.cells[0][0].text == fmt::format("{:.3f} ± {:.3f}", 10.25, std::sqrt(0.125)));
}

TEST_CASE("table command: formats, --out, byte-identical regeneration, errors with file:line and exit 2",
          "[analysis]") {
  Fixture fx;
  for (const std::string format : {"md", "tex", "csv"}) {
    const auto a = fx.dir.file("a." + format), b = fx.dir.file("b." + format);
    REQUIRE(test::run_command(
                fwlab_cmd(fmt::format("table {} --db {} --format {} --out {}", fx.file, fx.db_path, format, a)))
                .exit_code == 0);
    REQUIRE(test::run_command(
                fwlab_cmd(fmt::format("table {} --db {} --format {} --out {}", fx.file, fx.db_path, format, b)))
                .exit_code == 0);
    CHECK(test::slurp(a) == test::slurp(b));
    CHECK_THAT(test::slurp(a), Catch::Contains("11.00 (*1/4)"));
  }
  const auto printed = test::run_command(fwlab_cmd(fmt::format("table {} --db {}", fx.file, fx.db_path)));
  CHECK(printed.exit_code == 0);
  CHECK(printed.output == test::slurp(fx.dir.file("a.md")));

  const auto missing = test::run_command(fwlab_cmd(fmt::format("table {} --db {}", fx.file, fx.dir.file("none.db"))));
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("none.db: no results database there"));
  CHECK_FALSE(fs::exists(fx.dir.file("none.db")));

  struct Bad {
    std::string from, to, message;
  };
  for (const auto& bad : std::vector<Bad>{
           {"rows = [\"rule\"]", "rows = [\"rul\"]",
            "9: table.rows[0]: 'rul' is not an axis of stage train (did you mean 'rule'?)"},
           {"reduce = { lr = \"best\", seed = \"mean\" }", "reduce = { lr = \"best\" }",
            "10: table.reduce: axis 'seed' varies within a cell"},
           {"reduce = { lr = \"best\", seed = \"mean\" }", "reduce = { lr = \"best\", seed = \"median\" }",
            "32: table.reduce.seed: must be \"best\" (the best value over the axis) or \"mean\""},
           {"metric = \"test_ppl\"", "metric = \"test_perplexity\"",
            "10: table.metric: unknown metric 'test_perplexity'"},
           {"kind = \"vs_m\"", "kind = \"vs_n\"", "8: plot[0].kind: unknown kind 'vs_n'"},
           {"kind = \"vs_m\"", "x = \"mm\"\nkind = \"versus\"",
            "5: plot[0].x: 'mm' is not an axis of the grid (did you mean 'm'?)"},
           {"kind = \"vs_m\"", "x = \"lr\"\nkind = \"vs_m\"",
            "5: plot[0].x: only kind \"versus\" takes x (\"vs_m\" has its own)"},
           {"metric = \"test_ppl\"", "digits = { test_pl = 1 }\nmetric = \"test_ppl\"",
            "22: table.digits.test_pl: 'test_pl' is not a metric of the table (did you mean 'test_ppl'?)"},
           {"columns = [\"m\"]", "label = {}\ncolumns = [\"m\"]",
            "9: table.label: unknown key (did you mean 'labels'?)"},
       }) {
    const auto text = grid_with(kGrid, bad.from, bad.to);
    test::spit(fx.file, text);
    const auto message = line_of(text, bad.to) + bad.message;  // file:line:column: key: message
    for (const std::string cmd : {"table", "report", "plot"}) {
      const auto r = test::run_command(fwlab_cmd(fmt::format("{} {} --db {}", cmd, fx.file, fx.db_path)));
      INFO(cmd << ": " << r.output);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.output, Catch::Contains(message));
    }
    // The sweep refuses the file before it starts anything: no database, no job directory.
    const auto sweep_db = fx.dir.file("sweep/fwlab.db");
    const auto r = test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker /bin/false", fx.file, sweep_db)));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
    CHECK_FALSE(fs::exists(fx.dir.file("sweep")));
  }
}

TEST_CASE("report: each diverged run with its sibling's differences, stability by setting, learning-rate frontier",
          "[analysis]") {
  Fixture fx;
  const auto r = test::run_command(
      fwlab_cmd(fmt::format("report {} --db {} --out {}", fx.file, fx.db_path, fx.dir.file("report.md"))));
  REQUIRE(r.exit_code == 0);
  const auto md = test::slurp(fx.dir.file("report.md"));
  // 5 diverged runs: 4 at delta m = 4, one at delta m = 16, lr 1e-2, seed 0.
  size_t sections = 0;
  for (size_t at = md.find("### "); at != std::string::npos; at = md.find("### ", at + 1)) ++sections;
  CHECK(sections == 5);
  CHECK_THAT(md, Catch::Contains("### lr=0.01 m=16 rule=delta seed=0 — stage train, job "));
  CHECK_THAT(md, Catch::Contains("| 7 | nonfinite_loss | nan | 2.5 | blocks.0 | 0.01 |"));
  // Its nearest converged siblings differ in one grid coordinate and one setting each (rule, m, lr or seed): the
  // one differing in the innermost axis wins — another seed converged.
  CHECK_THAT(md, Catch::Contains("Nearest converged sibling: lr=0.01 m=16 rule=delta seed=1 (job ") &&
                     Catch::Contains("(this run, then the sibling):\n\n- `seed`: 0 here, 1 there\n\n"));
  // delta at m = 4 diverged at both learning rates and seeds: its nearest converged sibling has another m.
  CHECK_THAT(md, Catch::Contains("Nearest converged sibling: lr=0.001 m=16 rule=delta seed=0 (job ") &&
                     Catch::Contains("- `model.mixer.m`: 4 here, 16 there\n"));
  // Stability by setting: delta has 8 runs with a result (3 finished, 5 diverged); add 8 finished.
  CHECK_THAT(md, Catch::Contains(fmt::format("| rule | delta | 8 | 5 | {:.0f}% |", 100.0 * 5 / 8)));
  CHECK_THAT(md, Catch::Contains("| rule | add | 8 | 0 | 0% |"));
  CHECK_THAT(md, Catch::Contains(fmt::format("| m | 4 | 8 | 4 | {:.0f}% |", 100.0 * 4 / 8)));
  // Frontier per cell (stage, coordinates without lr).
  CHECK_THAT(md, Catch::Contains("| train | m=16 rule=delta seed=0 | 0.001 | 0.01 | 0.001 | 0.01 |"));
  CHECK_THAT(md, Catch::Contains("| train | m=16 rule=delta seed=1 | 0.001, 0.01 | – | 0.01 | – |"));
  CHECK_THAT(md, Catch::Contains("| train | m=4 rule=delta seed=0 | – | 0.001, 0.01 | * | 0.001 |"));
  // Crashes and timeouts are listed apart from divergences, one line each.
  CHECK_THAT(
      md, Catch::Contains(
              "| lr=0.001 m=16 rule=decay seed=0 | train | crashed | worker crashed: \\| std::bad_alloc at step 3 |"));
  const auto again = test::run_command(fwlab_cmd(fmt::format("report {} --db {}", fx.file, fx.db_path)));
  CHECK(again.output == md);
}

TEST_CASE("plot: learning curves per row and metric vs m, diverged runs drawn and labelled", "[analysis]") {
  Fixture fx;
  const auto out = fx.dir.file("plots");
  const auto r = test::run_command(fwlab_cmd(fmt::format("plot {} --db {} --out {}", fx.file, fx.db_path, out)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const std::string name : {"curves_add", "curves_delta", "curves_gated", "curves_decay", "vs_m"}) {
    for (const std::string ext : {".png", ".svg", ".gp"}) {
      INFO(name + ext);
      REQUIRE(fs::exists(fs::path(out) / (name + ext)));
      CHECK(fs::file_size(fs::path(out) / (name + ext)) > 200);
    }
    CHECK(test::slurp(out + "/" + name + ".png").substr(1, 3) == "PNG");
  }
  const auto delta = test::slurp(out + "/curves_delta.gp");
  CHECK_THAT(delta, Catch::Contains("'m=16, lr=0.01, seed=0 — diverged at step 7 (nonfinite\\_loss)'"));
  CHECK_THAT(delta, Catch::Contains("set arrow from 7, graph 0 to 7, graph 1"));
  CHECK_THAT(delta, Catch::Contains("'m=16, lr=0.001, seed=1'"));
  CHECK_THAT(test::slurp(out + "/curves_delta.svg"), Catch::Contains("diverged at step 7"));
  CHECK_THAT(test::slurp(out + "/curves_gated.gp"), Catch::Contains("'m=4, lr=0.001, seed=0 (running)'"));
  // A column's cells side by side: m = 16 holds every rule's runs, m = 4 none of decay's (not applicable there).
  const auto m16 = test::slurp(out + "/curves_column_16.gp");
  CHECK_THAT(m16, Catch::Contains("'delta, lr=0.01, seed=0 — diverged at step 7 (nonfinite\\_loss)'") &&
                      Catch::Contains("'add, lr=0.001, seed=1'") &&
                      Catch::Contains("'decay, lr=0.01, seed=0 (crashed)'"));
  CHECK_THAT(test::slurp(out + "/curves_column_4.gp"),
             Catch::Contains("'add, lr=0.01, seed=0'") && !Catch::Contains("decay"));
  const auto vs_m = test::slurp(out + "/vs_m.gp");
  CHECK_THAT(vs_m, Catch::Contains("t 'add'") && Catch::Contains("t 'delta'") &&
                       Catch::Contains("t 'delta: diverged (no value)'"));
  CHECK_THAT(vs_m, Catch::Contains("set xlabel 'm (feature / key dimension of the state, per head)'"));
  // add at m = 4: the best learning rate's mean and its sd as error bars.
  CHECK_THAT(vs_m, Catch::Contains(fmt::format("4 {:.10g} {:.10g} {:.10g}\n", 10.25, 10.25 - std::sqrt(0.125),
                                               10.25 + std::sqrt(0.125))));
  CHECK_THAT(r.output, Catch::Contains("vs_m.png (.svg, .gp): add; delta"));

  const auto no_gnuplot = test::run_command(
      fwlab_cmd(fmt::format("plot {} --db {} --out {} --gnuplot /nonexistent/gnuplot", fx.file, fx.db_path, out)));
  CHECK(no_gnuplot.exit_code == 1);
  CHECK_THAT(no_gnuplot.output, Catch::Contains("not found: install gnuplot"));
}

TEST_CASE("labels: a number's label names that number on the table's own axes only", "[analysis]") {
  // layer_selection labels k's values ("1" = "1/8 softmax"); its figures once called seed 1 "1/8 softmax" too.
  TableSpec spec;
  spec.rows = {"rule"}, spec.columns = {"k"};
  spec.labels = {{"1", "1/8 softmax"}, {"pairs", "S"}, {"decay", "Decay"}};
  CHECK(spec.axis_value("k", "1", false) == "1/8 softmax");
  CHECK(spec.axis_value("seed", "1", false) == "seed=1");
  CHECK(spec.axis_value("k", "3", false) == "k=3");
  CHECK(spec.axis_value("pairs", "8", false) == "S=8");
  CHECK(spec.axis_value("rule", "decay", true) == "Decay");
  CHECK(spec.axis_value("selector", "first", true) == "first");
}

TEST_CASE("plot: a figure of many runs grows tall enough for its legend in one column", "[analysis]") {
  // 48 runs (MQAR's 8 rules x 3 learning rates x 2 seeds): at 600 px gnuplot set the key in columns that squeezed
  // the plot to a sliver. Each legend line takes 16 px, plus 120 for the title, labels and border.
  test::TempDir dir("tall_legend");
  auto figure = [&](int runs, const std::string& name) {
    plotting::Panel panel;
    panel.title = "many runs", panel.xlabel = "training step", panel.ylabel = "validation accuracy";
    for (int n = 0; n < runs; ++n) {
      plotting::Series run;
      run.title = fmt::format("run {}", n);
      run.points = {{0, 0.25, 0.25, 0.25}, {100, 0.5 + n / 200.0, 0, 0}};
      panel.series.push_back(run);
    }
    plotting::render({panel}, name, dir.path().string(), "gnuplot");
    return test::slurp(dir.file(name + ".gp"));
  };
  CHECK_THAT(figure(48, "tall"), Catch::Contains("pngcairo size 1100,888 ") && Catch::Contains("svg size 1100,888 "));
  CHECK_THAT(figure(16, "usual"), Catch::Contains("pngcairo size 1100,600 "));
  CHECK(fs::file_size(dir.file("tall.png")) > 1000);
}

namespace {

// teacher -> swap (10 steps) -> ft (10 steps); batch 4 x 8 tokens = 32 a step; two seeds of swap and ft.
const std::string kTokensExperiment = R"([experiment]
name = "tokens"
description = "quality per token"
[defaults]
seed = 0
data = "brown"
tokenizer = "byte"
[defaults.model]
vocab = 256
d_model = 16
n_layers = 1
n_heads = 1
head_dim = 16
context = 8
[defaults.train]
batch_size = 4
seq_len = 8
[stage.teacher]
axes = []
mixer = "softmax"
steps = 20
[stage.swap]
from = "teacher"
mixer = "fast_weight"
norm = "none"
m = 4
steps = 10
[stage.ft]
from = "swap"
mixer = "fast_weight"
norm = "none"
m = 4
steps = 10
[grid]
rule = ["decay"]
seed = [0, 1]
[table]
stage = ["swap", "ft"]
rows = ["rule"]
columns = ["stage"]
metric = "valid_ppl"
reduce = { seed = "mean" }
reference = [{ label = "teacher", stage = "teacher" }]
[[plot]]
kind = "vs_tokens"
metric = "valid_ppl"
)";

}  // namespace

TEST_CASE("plot vs_tokens: validation curves against tokens since the teacher, seeds as a band", "[analysis]") {
  const std::string text = kTokensExperiment;
  test::TempDir dir{"tokens"};
  const auto file = dir.file("tokens.toml"), db_path = dir.file("fwlab.db");
  test::spit(file, text);
  {
    Db db(db_path);
    auto job = db.prepare(
        "INSERT INTO jobs(id, experiment, stage, coords, config, status) VALUES(?, 'tokens', ?, ?, ?, 'finished')");
    auto ev =
        db.prepare("INSERT INTO evals(job_id, split, step, checkpoint, loss, ppl) VALUES(?, 'valid', ?, '', ?, ?)");
    for (const auto& j : plan_jobs(load_experiment(file, ""), FWLAB_SOURCE_DIR, kFwlabVersion)) {
      job.bind(1, j.id).bind(2, j.stage).bind(3, j.coords.dump()).bind(4, j.spec.dump()).run();
      const double seed = j.coords.contains("seed") ? j.coords["seed"].get<double>() : 0.0;
      const double base = j.stage == "teacher" ? 5.0 : j.stage == "swap" ? 20.0 : 10.0;
      for (int64_t step : {1, 10}) {
        const double ppl = base + 2.0 * seed - static_cast<double>(step) / 10;  // seeds 0 and 1: 2 apart
        ev.bind(1, j.id).bind(2, step).bind(3, std::log(ppl)).bind(4, ppl).run();
      }
    }
  }
  const auto out = dir.file("plots");
  const auto r = test::run_command(fwlab_cmd(fmt::format("plot {} --db {} --out {}", file, db_path, out)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto gp = test::slurp(out + "/vs_tokens.gp");
  // swap: x = step x 32; ft: 10 steps of swap (320 tokens) first. Mean of the seeds, +- their sd (sqrt(2)).
  const double sd = std::sqrt(2.0);
  for (const auto& [x, mean] :
       std::vector<std::pair<double, double>>{{32, 20.9}, {320, 20.0}, {352, 10.9}, {640, 10.0}})
    CHECK_THAT(gp, Catch::Contains(fmt::format("{:.10g} {:.10g} {:.10g} {:.10g}\n", x, mean, mean - sd, mean + sd)));
  CHECK_THAT(gp, Catch::Contains("filledcurves") && Catch::Contains("t 'decay, ft (2 seeds)'") &&
                     Catch::Contains("4 w l dt 3 lw 2 lc 3 t 'teacher'"));  // the teacher's best validation

  const auto bad =
      grid_with(text, "kind = \"vs_tokens\"\nmetric = \"valid_ppl\"", "kind = \"vs_tokens\"\nmetric = \"test_ppl\"");
  test::spit(file, bad);
  const auto refused = test::run_command(fwlab_cmd(fmt::format("plot {} --db {} --out {}", file, db_path, out)));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("plot[0].metric: kind \"vs_tokens\" draws a validation curve"));
}

TEST_CASE("table --compare: orderings, rank correlation and marks against a published table, computed by hand",
          "[analysis]") {
  const std::string published = kPublishedHead + R"(
delta = ["*", 8.0]
gated = [8.0, ""]
decay = ["N/A", 12.0]
)";
  Fixture fx(kGrid + published);
  const auto r = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --compare", fx.file, fx.db_path)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Cells with both values: add m=4 (10.25 vs 9), add m=16 (13.25 vs 14), delta m=16 (11.00 vs 8). Pairs the paper
  // orders: add4-add16 (a row: both lower at m=4, agree), add16-delta16 (a column: both higher for add, agree),
  // add4-delta16 (neither: fwlab 10.25 < 11, paper 9 > 8, disagree).
  CHECK_THAT(r.output,
             Catch::Contains(
                 "| rule | m=4 | m=16 |\n| :--- | ---: | ---: |\n| add | 10.25 ± 0.35 / 9 | 13.25 ± 0.35 / 14 |\n"
                 "| delta | * / * | 11.00 (*1/4) / 8 |\n| gated | … / 8 | – / – |\n| decay | N/A / N/A | ! / 12 |\n"));
  CHECK_THAT(r.output, Catch::Contains("within rows 1/1 (100%), within columns 1/1 (100%), overall 2/3 (67%)"));
  // Spearman by hand: ranks (1, 3, 2) and (2, 3, 1), d^2 = 1 + 0 + 1: rho = 1 - 6 * 2 / (3 * (9 - 1)) = 0.5.
  CHECK_THAT(r.output, Catch::Contains("Spearman rank correlation over the 3 cells with both values: 0.50."));
  CHECK_THAT(r.output, Catch::Contains("Diverged (*): both delta, m=4."));
  CHECK_THAT(r.output, Catch::Contains("N/A: both decay, m=4."));
  CHECK_THAT(r.output,
             Catch::Contains("Largest rank differences: add, m=4: fwlab 10.25 ± 0.35 (rank 1 of 3), paper 9 (rank 2); "
                             "delta, m=16: fwlab 11.00 (*1/4) (rank 2 of 3), paper 8 (rank 1)."));
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1.0));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0));
  CHECK(spearman({1, 1, 2}, {5, 6, 7}) == Approx(std::sqrt(0.75)));  // tied ranks (1.5, 1.5, 3) against (1, 2, 3)
  CHECK(!spearman({1, 2}, {2, 1}));
  // The divergence report carries the same comparison.
  REQUIRE(test::run_command(
              fwlab_cmd(fmt::format("report {} --db {} --out {}", fx.file, fx.db_path, fx.dir.file("report.md"))))
              .exit_code == 0);
  CHECK_THAT(test::slurp(fx.dir.file("report.md")),
             Catch::Contains("## Against the published table") && Catch::Contains("overall 2/3 (67%)"));

  struct Bad {
    std::string from, to, message;
  };
  for (const auto& bad : std::vector<Bad>{
           {"gated = [8.0, \"\"]", "hebb = [8.0, \"\"]", "published.rows.hebb: 'hebb' is not a row of the table"},
           {"add = [9.0, 14.0]", "add = [9.0]", "published.rows.add: has 1 values for 2 columns"},
           {"add = [9.0, 14.0]", "add = [9.0, \"x\"]",
            "published.rows.add[1]: must be a number, \"*\" (diverged), \"N/A\" or \"\" (not reported)"},
           {"columns = [\"4\", \"16\"]", "columns = [\"4\", \"32\"]",
            "published.columns[1]: '32' is not a column of the table"},
           {"better = \"lower\"", "better = \"higher\"", "published.better: the table's test_ppl is better lower"},
       }) {
    const auto text = grid_with(kGrid + published, bad.from, bad.to);
    test::spit(fx.file, text);
    for (const std::string cmd : {"table", "report", "sweep"}) {
      const auto e = test::run_command(fwlab_cmd(
          fmt::format("{} {} --db {}", cmd, fx.file, cmd == "sweep" ? fx.dir.file("new/fwlab.db") : fx.db_path)));
      INFO(cmd << ": " << e.output);
      CHECK(e.exit_code == 2);
      CHECK_THAT(e.output, Catch::Contains(line_of(text, bad.to)) && Catch::Contains(bad.message));
    }
  }
  test::spit(fx.file, kGrid);
  const auto none = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --compare", fx.file, fx.db_path)));
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("--compare: the file has no [published] section"));
}

TEST_CASE(
    "table: a run that diverged after its best checkpoint shows that checkpoint's test value, marked; --compare "
    "counts orderings inside fwlab's spread apart",
    "[analysis]") {
  const std::string published = kPublishedHead + "\ndelta = [8.5, 8.0]\n";
  Fixture fx(kGrid + published);
  {  // delta at m = 4, lr 1e-2: both seeds diverged after validating; their best checkpoints scored 10.0 and 10.5 on
     // test
    Db db(fx.db_path);
    const auto jobs = plan_jobs(load_experiment(fx.file, ""), FWLAB_SOURCE_DIR, kFwlabVersion);
    auto ev =
        db.prepare("INSERT INTO evals(job_id, split, step, checkpoint, loss, ppl) VALUES(?, 'test', 5, 'best', ?, ?)");
    for (const auto& j : jobs)
      if (j.coords["rule"] == "delta" && j.coords["m"] == 4 && j.coords["lr"].get<double>() > 5e-3) {
        const double ppl = 10.0 + 0.5 * j.coords["seed"].get<double>();
        ev.bind(1, j.id).bind(2, std::log(ppl)).bind(3, ppl).run();
      }
  }
  const auto md = test::run_command(fwlab_cmd(fmt::format("table {} --db {}", fx.file, fx.db_path)));
  INFO(md.output);
  REQUIRE(md.exit_code == 0);
  // 4 runs: 2 diverged after their best (the value, 10.25 ± 0.35 over lr 1e-2), 2 diverged before any test value.
  CHECK_THAT(md.output, Catch::Contains("| delta | 10.25 ± 0.35 (†2/4) (*2/4) | 11.00 (*1/4) |"));
  CHECK_THAT(md.output, Catch::Contains("†: diverged after its best checkpoint: the value is that checkpoint's"));
  const auto tex = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --format tex", fx.file, fx.db_path)));
  CHECK_THAT(tex.output, Catch::Contains("delta & 10.25 $\\pm$ 0.35 ($\\dagger$2/4) (*2/4) & 11.00 (*1/4)"));

  // fwlab: add 10.25 ± 0.35 | 13.25 ± 0.35, delta 10.25 ± 0.35 | 11.00 (one run). Paper: add 9 | 14, delta 8.5 | 8.
  // add4-delta4 (a column): the spreads overlap (|0| <= 0.35 + 0.35): within noise. Of the other five pairs,
  // add4-add16 (row), add16-delta4, add16-delta16 (column) agree; add4-delta16 (10.25 < 11 against 9 > 8, apart
  // by 0.75 > 0.35) and delta4-delta16 (row: 10.25 < 11 against 8.5 > 8) disagree.
  const auto r = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --compare", fx.file, fx.db_path)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(
      r.output,
      Catch::Contains(
          "fwlab's mean ± sd intervals apart): within rows 1/2 (50%), within columns 1/1 (100%), overall 3/5 (60%)."));
  CHECK_THAT(r.output,
             Catch::Contains("Within noise (fwlab's mean ± sd intervals overlap: counted apart, neither agreeing nor "
                             "disagreeing): within rows 0, within columns 1, overall 1."));
}

TEST_CASE("table --compare: a paper's task columns beside a table whose columns are its metrics", "[analysis]") {
  // Columns are metrics (evaluation tasks as columns); m reduces to its best value. test_bpc is not a column of
  // this table: it stays a column of "–" and the caption names it.
  auto grid = grid_with(grid_with(kGrid, "columns = [\"m\"]\nmetric = \"test_ppl\"",
                                  "columns = []\nmetrics = [\"test_ppl\", \"valid_ppl\"]"),
                        "reduce = { lr = \"best\", seed = \"mean\" }",
                        "reduce = { lr = \"best\", seed = \"mean\", m = \"best\" }");
  const std::string published = R"(
[published]
source = "Made up 2026, Table 9"
better = "lower"
metrics = ["test_ppl", "test_bpc"]
[published.rows]
add = [9.0, 3.0]
)";
  Fixture fx(grid + published);
  const auto r = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --compare", fx.file, fx.db_path)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // add: best m is 4 (ppl 10 + 1 - 1 = 10 at seed 0, 10.5 at seed 1): 10.25 ± 0.35.
  CHECK_THAT(
      r.output,
      Catch::Contains("| rule | test_ppl | test_bpc |\n| :--- | ---: | ---: |\n| add | 10.25 ± 0.35 / 9 | – / 3 |\n"));
  CHECK_THAT(r.output, Catch::Contains("Not measured in this table: test_bpc."));
  // A paper whose columns this table measures none of: no page of "– / 3", exit 1 and why.
  test::spit(fx.file, grid_with(grid_with(grid + published, "metrics = [\"test_ppl\", \"test_bpc\"]",
                                          "metrics = [\"test_bpc\"]"),
                                "add = [9.0, 3.0]", "add = [3.0]"));
  const auto none = test::run_command(
      fwlab_cmd(fmt::format("table {} --db {} --compare --out {}", fx.file, fx.db_path, fx.dir.file("c.md"))));
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.output, Catch::Contains("no cell has both a value here and the paper's: nothing to compare"));
  CHECK_FALSE(fs::exists(fx.dir.file("c.md")));
  struct Bad {
    std::string from, to, message;
  };
  for (const auto& bad : std::vector<Bad>{
           {"metrics = [\"test_ppl\", \"test_bpc\"]", "metrics = [\"test_ppl\", \"test_accuracy\"]",
            "published.metrics[1]: test_accuracy is better higher"},
           {"metrics = [\"test_ppl\", \"test_bpc\"]", "metrics = [\"test_ppl\", \"test_ppx\"]",
            "unknown metric 'test_ppx'"},
           {"better = \"lower\"", "better = \"lower\"\ncolumns = [\"4\"]",
            "published.columns: give either metrics (one per column) or metric and columns"},
       }) {
    const auto text = grid_with(grid + published, bad.from, bad.to);
    test::spit(fx.file, text);
    const auto e = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --compare", fx.file, fx.db_path)));
    INFO(e.output);
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.output,
               Catch::Contains(line_of(text, bad.to.substr(bad.to.rfind('\n') + 1))) && Catch::Contains(bad.message));
  }
}

namespace {

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The inline SVG chart whose label starts with `label`, up to its </svg>.
std::string chart_of(const std::string& page, const std::string& label) {
  const auto at = page.find("aria-label=\"" + label);
  REQUIRE(at != std::string::npos);
  return page.substr(at, page.find("</svg>", at) - at);
}

// A runs page's cells of column `c` (0 = job), row by row.
std::vector<std::string> runs_column(const std::string& page, size_t c) {
  std::vector<std::string> out;
  for (size_t at = page.find("<tr><td"); at != std::string::npos; at = page.find("<tr><td", at + 1)) {
    size_t cell = at;
    for (size_t k = 0; k <= c; ++k) cell = page.find("<td", cell + 1);
    const auto open = page.find('>', cell) + 1;
    out.push_back(page.substr(open, page.find("</td>", open) - open));
  }
  return out;
}

}  // namespace

TEST_CASE("site: a row's and a column's cells on one chart, the report as HTML tables, runs sorted and filtered",
          "[analysis]") {
  Fixture fx(kGrid + kPublishedHead + "\ndelta = [8.0, 12.0]\ngated = [9.5, 9.9]\n");
  Db db(fx.db_path, true);
  const std::vector<SiteEntry> entries{{fx.file, "grid", "", ""}};  // the fixture writes jobs, not the sweep's cells
  const SiteContext ctx{FWLAB_SOURCE_DIR, kFwlabVersion, "gnuplot", false};
  const auto page = experiment_page(db, entries[0], ctx);
  // Row delta: its two cells (m = 4, 16) hold 4 runs each (lr x seed): 8 series, the 5 diverged ones crossed.
  const auto delta = chart_of(page, "validation ppl — row delta, one line per column");
  CHECK_THAT(delta, Catch::Contains("data-series=\"8\""));
  CHECK(occurrences(delta, "<g class=\"series\"") == 8);
  CHECK(occurrences(delta, "class=\"diverged\"") == 5);
  CHECK_THAT(delta, Catch::Contains("m=16 · lr=0.01, seed=0 — diverged at step 7 ×"));
  // Column m = 4: add's 4 runs, delta's 4, gated's one that has started; decay is not applicable there.
  CHECK(occurrences(chart_of(page, "validation ppl — column m=4, one line per row"), "<g class=\"series\"") == 9);
  // The comparison and the report are HTML: tables, headings under the page's own, no Markdown source left.
  CHECK_THAT(page, !Catch::Contains("<pre") && !Catch::Contains("| --- |") && !Catch::Contains("| :--- |"));
  CHECK_THAT(page, Catch::Contains("<h4>grid against Made up 2026, Table 9</h4>") &&
                       Catch::Contains("<td align=\"right\">10.25 ± 0.35 / 9</td>"));
  CHECK_THAT(page, Catch::Contains("<h3>Stability by setting</h3>") &&
                       Catch::Contains("<td align=\"left\">crashed</td>") &&
                       Catch::Contains("<text x=\"506\" y=\"36\" font-size=\"11\">0 of 8 diverged</text>"));

  const SiteContext live{FWLAB_SOURCE_DIR, kFwlabVersion, "gnuplot", true};
  // Columns: job, stage, rule, m, lr, seed, status, test_ppl, valid_loss. By test_ppl: ascending, runs without last.
  const auto by_ppl = runs_column(runs_page(db, entries[0], live, {"test_ppl", false, {}}), 7);
  REQUIRE(by_ppl.size() == 28);   // 4 rules x 2 m x 2 lr x 2 seeds, less decay at m = 4
  CHECK(by_ppl.front() == "10");  // add, m = 4, lr 1e-2, seed 0
  const auto valued = std::find(by_ppl.begin(), by_ppl.end(), "–") - by_ppl.begin();
  CHECK(valued == 11);  // add's 8 and delta's 3 finished runs
  std::vector<double> values;
  for (long i = 0; i < valued; ++i) values.push_back(std::stod(by_ppl[static_cast<size_t>(i)]));
  CHECK(std::is_sorted(values.begin(), values.end()));
  CHECK(std::all_of(by_ppl.begin() + valued, by_ppl.end(), [](const std::string& s) { return s == "–"; }));
  // Filtered by two settings and sorted by a third, descending.
  const auto filtered = runs_page(db, entries[0], live, {"seed", true, {{"rule", "delta"}, {"m", "16"}}});
  CHECK(runs_column(filtered, 2) == std::vector<std::string>(4, "delta"));
  CHECK(runs_column(filtered, 5) == std::vector<std::string>{"1", "1", "0", "0"});
  CHECK(runs_column(filtered, 6) == std::vector<std::string>{"finished", "finished", "finished", "diverged"});
  CHECK_THROWS_WITH(runs_page(db, entries[0], live, {"colour", false, {}}),
                    Catch::Contains("the runs page has no column 'colour' (it has: stage, rule, m, lr, seed, status, "
                                    "test_ppl, valid_loss)"));
  CHECK_THROWS_WITH(runs_page(db, entries[0], live, {"", false, {{"test_ppl", "10"}}}),
                    Catch::Contains("no setting 'test_ppl'"));
  // The static site: one page per sort column and direction, one per value of a setting that varies.
  const auto pages = runs_pages(db, entries[0], ctx);
  CHECK(pages.size() == 1 + 2 * 8 + (4 + 2 + 2 + 2 + 6));  // rule 4, m 2, lr 2, seed 2, status 6 values
  CHECK(pages[0].first == "e/grid.runs.html");
}

TEST_CASE("html: Markdown becomes tables, headings and emphasis; raw HTML in it stays text", "[analysis][unit]") {
  const auto out = html::markdown(
      "# Report\n\nA *b* `c` <img src=x onerror=alert(1)>\n\n| k | v |\n| :--- | ---: |\n| <script>x</script> | 1 \\| "
      "2 |\n",
      1);
  CHECK_THAT(out, Catch::Contains("<h2>Report</h2>") && Catch::Contains("<em>b</em> <code>c</code>"));
  CHECK_THAT(out, Catch::Contains("&lt;img src=x onerror=alert(1)&gt;") && !Catch::Contains("<img"));
  CHECK_THAT(out, Catch::Contains("<th align=\"left\">k</th>") &&
                      Catch::Contains("<td align=\"left\">&lt;script&gt;x&lt;/script&gt;</td>") &&
                      Catch::Contains("<td align=\"right\">1 | 2</td>"));
  CHECK_THAT(html::markdown("###### deep", 3), Catch::Contains("<h6>deep</h6>"));
  // Links stay links only to relative addresses and http(s); a script's address and an image's become "#".
  const auto links =
      html::markdown("[a](javascript:alert(1)) [b](https://x.org/p) [c](../job/1.html) ![d](http://x/i.png)");
  CHECK_THAT(links, Catch::Contains("<a href=\"#\">a</a>") && Catch::Contains("<a href=\"https://x.org/p\">b</a>") &&
                        Catch::Contains("<a href=\"../job/1.html\">c</a>") && Catch::Contains("src=\"#\"") &&
                        !Catch::Contains("javascript") && !Catch::Contains("http://x/i.png"));
}

TEST_CASE("report: a speed table's jobs whose throughput changed while they ran are listed, steady ones not",
          "[analysis]") {
  Fixture fx(grid_with(kGrid, "metric = \"test_ppl\"", "metric = \"tokens_per_s\""));
  const auto jobs = plan_jobs(load_experiment(fx.file, ""), FWLAB_SOURCE_DIR, kFwlabVersion);
  std::string steady, shifted;
  for (const auto& j : jobs)
    if (j.applicable && j.coords["rule"] == "add" && j.coords["lr"].get<double>() < 5e-3 && j.coords["seed"] == 0)
      (j.coords["m"] == 4 ? steady : shifted) = j.id;
  {
    Db db(fx.db_path);
    auto metric = db.prepare("INSERT INTO metrics(job_id, key, step, value, time) VALUES(?, 'tokens_per_s', ?, ?, 0)");
    // The first interval (warm-up) is left out: 500 and 900 weigh nothing. steady: within 2%; shifted: 1000 for
    // three intervals, then 1600 for three (percentiles by linear interpolation: 10th 1000, median 1300, 90th 1600).
    const std::vector<double> steady_rates{900, 1000, 1010, 990, 1005, 1000},
        shifted_rates{500, 1000, 1000, 1000, 1600, 1600, 1600};
    for (const auto& [id, rates] : {std::pair{steady, steady_rates}, std::pair{shifted, shifted_rates}})
      for (size_t n = 0; n < rates.size(); ++n) metric.bind(1, id).bind(2, int64_t(10 * n)).bind(3, rates[n]).run();
  }
  const auto r = test::run_command(fwlab_cmd(fmt::format("report {} --db {}", fx.file, fx.db_path)));
  REQUIRE(r.exit_code == 0);
  const auto at = r.output.find("## Throughput during the runs");
  REQUIRE(at != std::string::npos);
  const auto section = r.output.substr(at);
  CHECK_THAT(section, Catch::Contains("spread by more than 20%"));
  CHECK_THAT(section, Catch::Contains(fmt::format(
                          "| lr=0.001 m=16 rule=add seed=0 | train | {} | 1300 | 1000 – 1600 | 1.60× |", shifted)));
  CHECK(section.find(steady) == std::string::npos);
  // A table that shows no speed gets no such section.
  Fixture plain;
  const auto p = test::run_command(fwlab_cmd(fmt::format("report {} --db {}", plain.file, plain.db_path)));
  CHECK(p.output.find("## Throughput") == std::string::npos);
}
