// The experiment catalog (experiments/*.toml) at its smoke profile, end to end with the real worker: sweep,
// then table, report and plots from the database the sweep filled.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "harness/db.h"
#include "tests/test_support.h"

using namespace fwlab;
namespace fs = std::filesystem;

namespace {

std::string fwlab_cmd(const std::string& args) { return fmt::format("{} {}", FWLAB_BIN, args); }

int64_t count(Db& db, const std::string& sql) {
  auto q = db.prepare(sql);
  REQUIRE(q.step());
  return q.integer(0);
}

struct Expected {
  std::string name;
  std::vector<std::string> table_lines;  // lines the Markdown table must contain
  std::vector<std::string> figures;      // file stems in plots/
};

// Sweeps `e.name` at the smoke profile into `dir`, then checks the analysis outputs; returns the Markdown table.
std::string run_smoke(const test::TempDir& dir, const Expected& e) {
  const auto file = fmt::format("{}/experiments/{}.toml", FWLAB_SOURCE_DIR, e.name);
  const auto db = dir.file("fwlab.db");
  const auto sweep = test::run_command(fwlab_cmd(fmt::format("sweep {} --profile smoke --db {}", file, db)));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);
  const auto table = test::run_command(fwlab_cmd(fmt::format("table {} --profile smoke --db {}", file, db)));
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  for (const auto& line : e.table_lines) CHECK_THAT(table.output, Catch::Contains(line));
  // Every cell holds a result: no "not run", "running" or "failed" marker.
  for (const std::string marker : {"| – |", "| … |", "| ! |", " … |", " ! |"}) CHECK_THAT(table.output, !Catch::Contains(marker));
  const auto report = test::run_command(fwlab_cmd(fmt::format("report {} --profile smoke --db {} --out {}", file, db, dir.file("report.md"))));
  CHECK(report.exit_code == 0);
  CHECK_THAT(test::slurp(dir.file("report.md")), Catch::StartsWith(fmt::format("# Divergence report: {} (smoke profile)", e.name)));
  const auto plots = test::run_command(fwlab_cmd(fmt::format("plot {} --profile smoke --db {} --out {}", file, db, dir.file("plots"))));
  INFO(plots.output);
  CHECK(plots.exit_code == 0);
  size_t listed = 0;
  for (size_t at = plots.output.find(".png (.svg, .gp)"); at != std::string::npos; at = plots.output.find(".png (.svg, .gp)", at + 1)) ++listed;
  CHECK(listed == e.figures.size());
  for (const auto& stem : e.figures)
    for (const std::string ext : {".png", ".svg", ".gp"}) {
      INFO(stem + ext);
      const auto path = fs::path(dir.file("plots")) / (stem + ext);
      CHECK((fs::exists(path) && fs::file_size(path) > 500));
    }
  return table.output;
}

}  // namespace

TEST_CASE("catalog: table1 at the smoke profile, end to end; a re-run does nothing", "[catalog]") {
  test::TempDir dir("table1");
  const auto md = run_smoke(dir, {"table1",
                                  {"| rule | Baseline | Norm ✗ | φ ✗ |", "| decay | N/A |", "Reference: softmax teacher (before fine-tuning): "},
                                  {"curves_add", "curves_delta", "curves_gated", "curves_decay"}});
  CHECK(std::count(md.begin(), md.end(), '\n') >= 10);
  Db db(dir.file("fwlab.db"), true);
  CHECK(count(db, "SELECT COUNT(*) FROM cells WHERE experiment = 'table1' AND profile = 'smoke'") == 13);
  CHECK(count(db, "SELECT COUNT(*) FROM cells WHERE applicable = 0 AND coords = '{\"rule\":\"decay\",\"variant\":\"baseline\"}'") == 1);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status IN ('finished', 'diverged')") == 12);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE stage = 'finetune' AND depends_on = (SELECT id FROM jobs WHERE stage = 'pretrain')") == 11);
  CHECK(count(db, "SELECT COUNT(*) FROM evals e JOIN jobs j ON j.id = e.job_id WHERE e.split = 'test' AND j.status = 'finished'") ==
        count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'"));
  CHECK(count(db, "SELECT COUNT(*) FROM events WHERE type = 'conversion'") == 11);
  const auto again = test::run_command(fwlab_cmd(fmt::format("sweep {}/experiments/table1.toml --profile smoke --db {}", FWLAB_SOURCE_DIR, dir.file("fwlab.db"))));
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("0 finished, 0 diverged") && Catch::Contains("12 already done, 1 n/a"));
  CHECK(count(db, "SELECT SUM(attempts) FROM jobs") == 12);
}

TEST_CASE("catalog: table2 at the smoke profile", "[catalog]") {
  test::TempDir dir("table2");
  run_smoke(dir, {"table2", {"| model | m | state / sequence | test ppl |", "| Softmax | none |", "| Gated | 16 |", "| Decay | 32 |"}, {"curves", "vs_m"}});
}

TEST_CASE("catalog: fig1_generation at the smoke profile: softmax state grows with the length, decay's does not", "[catalog]") {
  test::TempDir dir("fig1");
  run_smoke(dir, {"fig1_generation", {"| Softmax (KV cache) |", "| Delta, m = 32 |", "| Decay, m = 32 |"}, {"generation"}});
  Db db(dir.file("fwlab.db"), true);
  const auto bytes = [&](const std::string& model, int64_t len) {
    return count(db, fmt::format("SELECT CAST(m.value AS INTEGER) FROM metrics m JOIN cells c ON c.job_id = m.job_id WHERE c.experiment = "
                                 "'fig1_generation' AND json_extract(c.coords, '$.model') = '{}' AND m.key = 'gen_state_bytes' AND m.step = {}",
                                 model, len));
  };
  CHECK(bytes("softmax", 256) > 10 * bytes("softmax", 16));
  CHECK(bytes("decay", 256) == bytes("decay", 16));
  CHECK(bytes("delta", 256) == bytes("delta", 16));
}

TEST_CASE("catalog: t2r_table1 at the smoke profile", "[catalog]") {
  test::TempDir dir("t2r");
  run_smoke(dir, {"t2r_table1",
                  {"| model | Random init | Pretrain |", "| T2R 75% | N/A |", "Reference: pretrained softmax transformer: "},
                  {"curves_elu", "curves_rfa", "curves_t2r", "curves_t2r_75"}});
}

TEST_CASE("catalog: t2r_feature_size at the smoke profile", "[catalog]") {
  test::TempDir dir("t2r_fs");
  run_smoke(dir, {"t2r_feature_size", {"| stage | m=4 | m=16 |", "| T2R, random init |", "| T2R, pretrain |"}, {"curves_scratch", "curves_finetune", "vs_m"}});
}

TEST_CASE("catalog: sru_attention at the smoke profile", "[catalog]") {
  test::TempDir dir("sru");
  run_smoke(dir, {"sru_attention", {"| attention_every | params | test bpc | train tokens/s |", "| k = 10 (last layer only) |", "| No attention |"}, {"curves"}});
}

TEST_CASE("catalog: mqar at the smoke profile (best learning rate per cell, softmax reference row)", "[catalog]") {
  test::TempDir dir("mqar");
  const auto md = run_smoke(dir, {"mqar", {"| rule | pairs=4, m=4 |", "| add |", "| decay |", "| softmax |"}, {"curves_add", "curves_decay", "vs_m"}});
  CHECK_THAT(md, Catch::Contains("Cells: test accuracy (best over lr)."));
}

TEST_CASE("catalog: every profile of every experiment file expands without error", "[catalog]") {
  for (const auto& entry : fs::directory_iterator(fs::path(FWLAB_SOURCE_DIR) / "experiments")) {
    if (entry.path().extension() != ".toml") continue;
    for (const std::string profile : {"smoke", "quick", "paper"}) {
      const auto r = test::run_command(fwlab_cmd(fmt::format("sweep {} --profile {} --dry-run --db /nonexistent/fwlab.db", entry.path().string(), profile)));
      INFO(entry.path().filename().string() << " " << profile << ": " << r.output);
      CHECK(r.exit_code == 0);
    }
    // Each file says what it reproduces and what differs at quick scale.
    const auto text = test::slurp(entry.path().string());
    CHECK(text.rfind("# ", 0) == 0);
    CHECK_THAT(text, Catch::Contains("quick"));
  }
}
