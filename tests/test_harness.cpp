// The fwlab orchestrator as users run it: malformed experiment files, job outcomes with a fake worker,
// kill -9 of the orchestrator, two sweeps on one database.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "contract/version.h"
#include "harness/db.h"
#include "harness/ingest.h"
#include "harness/plan.h"
#include "harness/scheduler.h"
#include "tests/test_support.h"

using namespace fwlab;
using fwlab::test::fwlab_cmd;
namespace fs = std::filesystem;

namespace {

const std::string kBase = R"([experiment]
name = "t"

[defaults]
steps = 5
seed = 0

[stage.pretrain]
axes = []
mixer = "softmax"

[stage.finetune]
from = "pretrain"
mixer = "fast_weight"
m = 4

[grid]
rule = ["add", "decay"]
variant = ["a", "b"]

[preset.variant.a]
norm = "none"

[preset.variant.b]
norm = "attn"

[[not_applicable]]
rule = "decay"
variant = "b"
)";

std::string with(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// A one-stage experiment over `n` learning rates whose jobs the fake worker runs in `steps` steps, slowly
// (seed 5: 0.05 s a step), so that a sweep can be interrupted while jobs run.
std::string slow_lr_grid(const std::string& name, int steps, int n) {
  std::string values;
  for (int i = 1; i <= n; ++i) values += fmt::format("{}{:.1f}", i > 1 ? ", " : "", 0.1 * i);
  return fmt::format(
      "[experiment]\nname = \"{}\"\n[defaults]\nsteps = {}\nseed = 5\n[stage.pretrain]\nmixer = \"softmax\"\n"
      "[grid]\nlr = [{}]\n",
      name, steps, values);
}

// A softmax pretraining and a fast-weight finetune from it, 4 steps each, over the seeds listed (the fake worker's
// behaviour by seed: 0 ok, 1 crash, 2 hang, 3 diverge, 4 killed once then ok).
std::string pretrain_finetune_grid(const std::string& name, const std::string& seeds) {
  return fmt::format(
      "[experiment]\nname = \"{}\"\n[defaults]\nsteps = 4\n[stage.pretrain]\nmixer = \"softmax\"\n"
      "[stage.finetune]\nfrom = \"pretrain\"\nmixer = \"fast_weight\"\nm = 4\nnorm = \"none\"\n[grid]\nseed = [{}]\n",
      name, seeds);
}

// `fwlab sweep` of FILE into DB with the fake worker.
std::string fake_sweep(const std::string& file, const std::string& db, const std::string& extra = "") {
  return fwlab_cmd(
      fmt::format("sweep {} --db {} --worker {}/tests/fake_worker.py{}", file, db, FWLAB_SOURCE_DIR, extra));
}

int64_t count(Db& db, const std::string& sql) {
  auto q = db.prepare(sql);
  q.step();
  return q.integer(0);
}

std::string query_text(Db& db, const std::string& sql) {
  auto q = db.prepare(sql);
  return q.step() ? q.text(0) : "";
}

// How many times the fake worker started, over every job folder under RUNS (each start appends a line).
size_t count_starts(const std::string& runs) {
  size_t n = 0;
  for (const auto& d : fs::directory_iterator(runs)) {
    const auto text = test::slurp((d.path() / "starts").string());
    n += static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  return n;
}

struct MalformedCase {
  std::string text;
  std::string expected;  // the whole message after "fwlab: <file>:"
  std::string profile = "";
};

// Each malformed variant of kBase and the one message it must give.
std::vector<MalformedCase> malformed_cases() {
  return {
      {with(kBase, "steps = 5", "steps = "), "5:9: TOML syntax error: "},
      {with(kBase, "[grid]", "[grdi]"), "17:1: grdi: unknown section (did you mean 'grid'?)"},
      {with(kBase, "steps = 5", "stpes = 5"), "5:9: defaults.stpes: unknown key (did you mean 'steps'?)"},
      {with(kBase, "steps = 5", "steps = \"five\""),
       "5:9: defaults.steps: must be an integer, got \"five\" (job key train.steps, stage pretrain, cell -)"},
      {with(kBase, "steps = 5", "steps = 5\nlr = -1"),
       "6:6: defaults.lr: must be positive, got -1 (job key optim.lr, stage pretrain, cell -)"},
      {with(kBase, "rule = \"decay\"\nvariant = \"b\"", "rule = \"add\"\nvariant = \"b\""),
       "25:8: preset.variant.b.norm: 'attn' normalization is not defined for rule 'decay' (Mao 2022, Table 1: N/A); "
       "use 'none' (job key model.mixer.norm, stage finetune, cell rule=decay variant=b)"},
      {with(with(kBase, "axes = []", "axes = []\nfrom = \"finetune\""), "[stage.finetune]", "[stage.finetune]"),
       "14:8: stage.finetune.from: dependency cycle finetune -> pretrain -> finetune"},
      {with(kBase, "variant = [\"a\", \"b\"]", "variant = [\"a\", \"c\"]"),
       "19:11: grid.variant: preset 'c' does not exist (did you mean 'a'?)"},
      {with(kBase, "from = \"pretrain\"", "from = \"pretrian\""),
       "13:8: stage.finetune.from: stage 'pretrian' does not exist (did you mean 'pretrain'?)"},
      {with(kBase, "axes = []", "axes = [\"rul\"]"), "9:8: stage.pretrain.axes: 'rul' is not an axis of the grid"},
      {with(kBase, "variant = \"b\"\n", "varient = \"b\"\n"),
       "29:11: not_applicable[0].varient: is not an axis of the grid (did you mean 'variant'?)"},
      {with(kBase, "rule = \"decay\"\nvariant", "rule = \"hebb\"\nvariant"),
       "27:1: not_applicable[0].rule: \"hebb\" is not a value of axis 'rule'"},
      {with(kBase, "rule = [\"add\", \"decay\"]", "rule = []"), "18:8: grid.rule: must be a non-empty list of values"},
      {with(kBase, "rule = [\"add\", \"decay\"]", "rule = [\"add\", \"add\"]"),
       "18:8: grid.rule: value \"add\" appears twice"},
      {kBase, "1:1: --profile fast: no such profile (defined: none)", "fast"},
      {kBase + "\n[profile.x]\n\"stage.nope.steps\" = 1\n",
       "32:22: profile.x.\"stage.nope.steps\": 'stage.nope' is not defined in the file", "x"},
      {with(kBase, "[experiment]\nname = \"t\"", ""), "1:1: experiment: missing [experiment] section with a name"},
      {with(kBase, "name = \"t\"", "name = \"my table\""),
       "2:8: experiment.name: must be a plain name of letters, digits, '_', '-' and '.' (at most 100, not starting "
       "with '.')"},
      {with(kBase, "variant = [\"a\", \"b\"]", "variant = [\"a\", \"b\"]\nfoo = [1, 2]"),
       "20:7: grid.foo: axis 'foo' sets no job key and has no [preset.foo.*] tables"},
      {with(kBase, "[preset.variant.a]", "[preset.varaint.a]"),
       "21:1: preset.varaint: is not an axis of the grid (did you mean 'variant'?)"},
      {with(kBase, "m = 4", "m = 4\ntimeout = -5"),
       "16:11: stage.finetune.timeout: must be a positive number of seconds"},
      {with(kBase, "norm = \"none\"", "norm = \"none\"\nfeature_map = \"elu1\""),
       "15:5: stage.finetune.m: feature map 'elu1' keeps the head dimension: m must be head_dim = 32, got 4 (job key "
       "model.mixer.m, stage finetune, cell rule=add variant=a)"},
      {with(with(kBase, "axes = []", "axes = [\"rule\"]"), "m = 4", "m = 4\naxes = [\"variant\"]"),
       "12:1: stage.finetune.axes: stage 'pretrain' it starts from varies 'rule', so this stage must too"},
      {with(kBase, "steps = 5", "steps = 5\n[defaults.optim]\nlrr = 1"),
       "7:7: defaults.optim.lrr: unknown key (did you mean 'lr'?) (job key optim.lrr, stage pretrain, cell -)"},
      {with(kBase, "mixer = \"softmax\"", "mixer = \"sofmax\""),
       "10:9: stage.pretrain.mixer: 'sofmax' is not one of softmax, local, fast_weight, sru, srupp, base_conv (did "
       "you mean 'softmax'?) (job key model.mixer.kind, stage pretrain, cell -)"},
      {kBase + "\n[axis.rule]\nkey = \"nope\"\n",
       "32:7: axis.rule.key: 'nope' is not a job key (a short name or section.key)"},
      {kBase + "\n[axis.rul]\nkey = \"m\"\n", "31:1: axis.rul: is not an axis of the grid (did you mean 'rule'?)"},
      // Attention transfer and the attention analysis need a softmax teacher where they start from.
      {with(with(kBase, "m = 4", "m = 4\nkind = \"transfer\""), "mixer = \"softmax\"",
            "mixer = \"fast_weight\"\nrule = \"gated\"\nm = 8"),
       "18:8: stage.finetune.kind: kind 'transfer' imitates softmax layers, but layer 0 of the model it starts from is "
       "gated/relu/none/m=8 (job key kind, stage finetune, cell rule=add variant=a)"},
      {with(with(kBase, "m = 4", "m = 4\nkind = \"attention\""), "mixer = \"softmax\"",
            "mixer = \"fast_weight\"\nrule = \"gated\"\nm = 8"),
       "18:8: stage.finetune.kind: kind 'attention' needs a softmax teacher, and no model up its source chain is "
       "softmax-only (set attention.teacher) (job key kind, stage finetune, cell rule=add variant=a)"},
      // experiment.seeds: a count, not beside a seed axis of the grid's own, nor under a stage's own seed.
      {with(kBase, "name = \"t\"", "name = \"t\"\nseeds = 0"),
       "3:9: experiment.seeds: must be an integer from 1 to 100 (runs of each cell)"},
      {with(with(kBase, "name = \"t\"", "name = \"t\"\nseeds = 2"), "variant = [\"a\", \"b\"]",
            "variant = [\"a\", \"b\"]\nseed = [1, 2]"),
       "21:8: grid.seed: 2 is not one of the seeds experiment.seeds = 2 runs (0 to 1): give the seeds there, or in the "
       "grid, not both"},
      {with(with(kBase, "name = \"t\"", "name = \"t\"\nseeds = 2"), "m = 4", "m = 4\nseed = 7"),
       "17:8: stage.finetune.seed: experiment.seeds = 2 varies the seed of this stage; its own seed would override "
       "every one of them"},
      // A value a profile replaced is reported at the profile's line.
      {kBase + "\n[profile.x]\n\"defaults.steps\" = \"five\"\n",
       "32:20: defaults.steps: must be an integer, got \"five\" (job key train.steps, stage pretrain, cell -)", "x"},
  };
}

}  // namespace

TEST_CASE("fwlab: malformed experiment files give one clear error naming file:line:column and key, and run nothing",
          "[harness]") {
  const auto cases = malformed_cases();
  REQUIRE(cases.size() >= 20);
  for (size_t i = 0; i < cases.size(); ++i) {
    DYNAMIC_SECTION("case " << i << ": " << cases[i].expected.substr(0, 60)) {
      test::TempDir dir("badexp");
      const auto file = dir.file("t.toml");
      test::spit(file, cases[i].text);
      const auto profile = cases[i].profile.empty() ? "" : " --profile " + cases[i].profile;
      auto r = test::run_command(
          fwlab_cmd(fmt::format("sweep {}{} --db {} --worker /bin/false", file, profile, dir.file("db/fwlab.db"))));
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.output, Catch::StartsWith("fwlab: " + file + ":" + cases[i].expected));
      CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);  // one message
      CHECK(!fs::exists(dir.file("db")));                              // no database, no job directories
    }
  }
}

TEST_CASE("fwlab: every misspelt mixer name of a job is reported, each with its line and a did-you-mean", "[harness]") {
  test::TempDir dir("two_names");
  const auto file = dir.file("t.toml");
  test::spit(file,
             "[experiment]\nname = \"t\"\n[defaults]\nsteps = 5\n[stage.run]\nmixer = \"fast_weight\"\n"
             "rule = \"decai\"\nfeature_map = \"idenity\"\nm = 4\n");
  const auto r = test::run_command(fwlab_cmd(fmt::format("sweep {} --dry-run --db {}", file, dir.file("fwlab.db"))));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(file + ":7:8: stage.run.rule: 'decai' is not one of add, delta, gated, decay, "
                                              "gated_delta (did you mean 'decay'?) (job key model.mixer.rule"));
  CHECK_THAT(r.output, Catch::Contains(file + ":8:15: stage.run.feature_map: 'idenity' is not one of") &&
                           Catch::Contains("(did you mean 'identity'?) (job key model.mixer.feature_map"));
}

TEST_CASE("fwlab: outcomes are recorded with the right status and cause; dependants of a failed job are blocked",
          "[harness]") {
  test::TempDir dir("outcomes");
  const auto file = dir.file("o.toml");
  // seed decides the fake worker's behaviour: 0 ok, 1 crash, 2 hang, 3 diverge, 4 killed once then ok.
  test::spit(file, pretrain_finetune_grid("outcomes", "0, 1, 2, 3, 4"));
  const auto db_path = dir.file("fwlab.db");
  auto r = test::run_command(fake_sweep(file, db_path, " --timeout 2 --retries 1 --jobs 2"));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("crashed (exit code 1)"));
  CHECK_THAT(r.output, Catch::Contains("timeout (no result after 2 s)"));
  Db db(db_path, true);
  auto status_of = [&](const char* stage, int seed) {
    auto q = db.prepare(
        "SELECT status, COALESCE(cause, ''), attempts FROM jobs WHERE stage = ? AND json_extract(coords, '$.seed') = "
        "?");
    q.bind(1, std::string(stage)).bind(2, static_cast<int64_t>(seed));
    REQUIRE(q.step());
    return std::make_tuple(q.text(0), q.text(1), q.integer(2));
  };
  CHECK(status_of("pretrain", 0) == std::make_tuple(std::string("finished"), std::string(""), int64_t{1}));
  CHECK(status_of("pretrain", 1) == std::make_tuple(std::string("crashed"), std::string("crash"), int64_t{2}));
  CHECK(status_of("pretrain", 2) == std::make_tuple(std::string("timeout"), std::string("timeout"), int64_t{2}));
  CHECK(status_of("pretrain", 3) == std::make_tuple(std::string("diverged"), std::string("loss_spike"), int64_t{1}));
  CHECK(status_of("pretrain", 4) == std::make_tuple(std::string("finished"), std::string(""), int64_t{2}));  // retried
  CHECK(std::get<0>(status_of("finetune", 0)) == "finished");
  CHECK(std::get<0>(status_of("finetune", 4)) == "finished");
  for (int seed : {1, 2, 3}) CHECK(std::get<0>(status_of("finetune", seed)) == "blocked");
  CHECK(count(db, "SELECT COUNT(*) FROM divergences WHERE cause = 'loss_spike'") == 1);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics") == 5 * 4);  // 4 finished jobs and the diverged one, 4 steps each
  // The best view: finished runs with a validation result only, ranked; a plain ORDER BY would put a run without a
  // value (diverged, crashed) first.
  CHECK(count(db, "SELECT COUNT(*) FROM best WHERE experiment = 'outcomes' AND stage = 'pretrain'") == 2);
  CHECK(count(db,
              "SELECT COUNT(*) FROM best b JOIN jobs j ON j.id = b.job_id WHERE b.rank = 1 AND "
              "j.status = 'finished' AND b.stage = 'pretrain'") == 1);
  CHECK(count(db, "SELECT best_valid_loss IS NULL FROM runs ORDER BY best_valid_loss LIMIT 1") == 1);
  CHECK(count(db, "SELECT best_valid_loss IS NULL FROM runs ORDER BY best_valid_loss NULLS LAST LIMIT 1") == 0);
}

TEST_CASE("fwlab: kill -9 of the orchestrator at any point, then a re-run: every cell once, nothing duplicated",
          "[harness]") {
  test::TempDir dir("kill9");
  const auto file = dir.file("k.toml");
  test::spit(file, slow_lr_grid("kill", 20, 6));
  const auto db_path = dir.file("fwlab.db");
  const auto cmd = fake_sweep(file, db_path, " --jobs 2");
  for (int delay_ms : {300, 900, 1500}) {
    auto pid_file = dir.file("pid");
    test::run_command(fmt::format("sh -c '{} >/dev/null 2>&1 & echo $! > {}; sleep {}; kill -9 $(cat {})'", cmd,
                                  pid_file, delay_ms / 1000.0, pid_file));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // orphaned workers notice and stop
  }
  auto final_run = test::run_command(cmd);
  INFO(final_run.output);
  CHECK(final_run.exit_code == 0);
  Db db(db_path, true);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 6);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs") == 6);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics") == 6 * 20);
  CHECK(
      count(db, "SELECT COUNT(*) FROM (SELECT job_id, key, step FROM metrics GROUP BY 1, 2, 3 HAVING COUNT(*) > 1)") ==
      0);
  CHECK(count(db, "SELECT COUNT(*) FROM evals") == 6);
  auto ok = db.prepare("PRAGMA integrity_check");
  REQUIRE(ok.step());
  CHECK(ok.text(0) == "ok");
  auto again = test::run_command(cmd);
  CHECK_THAT(again.output, Catch::Contains("0 finished") && Catch::Contains("6 already done"));
}

TEST_CASE("fwlab: a database lost, the records kept: a new sweep takes the results from the records, runs nothing",
          "[harness]") {
  test::TempDir dir("adopt");
  const auto file = dir.file("a.toml");
  // seed 0 finishes, seed 3 diverges (fake worker): the finetune of seed 3 is blocked.
  test::spit(file, pretrain_finetune_grid("adopt", "0, 3"));
  const auto runs = dir.file("runs");
  auto first = test::run_command(fake_sweep(file, dir.file("first.db"), " --runs " + runs));
  INFO(first.output);
  REQUIRE(count_starts(runs) == 3);
  Db a(dir.file("first.db"), true);
  // The fake worker writes no checkpoint. The finetune's own record kept, none is needed: nothing runs.
  const auto kept = dir.file("runs_kept");
  fs::copy(runs, kept, fs::copy_options::recursive);
  auto all_kept = test::run_command(fake_sweep(file, dir.file("kept.db"), " --runs " + kept));
  CHECK_THAT(all_kept.output,
             Catch::Contains("0 finished, 0 diverged") && Catch::Contains("3 taken from the records in their folders"));
  CHECK(count_starts(kept) == 3);
  // Its record lost, the finetune runs again, and so does the job it starts from, which has no checkpoint.
  const auto copy = dir.file("runs_copy");
  fs::copy(runs, copy, fs::copy_options::recursive);
  const auto finetune = query_text(a, "SELECT id FROM jobs WHERE stage = 'finetune' AND status = 'finished'");
  REQUIRE(fs::remove_all(fs::path(copy) / finetune) > 0);
  auto without = test::run_command(fake_sweep(file, dir.file("without.db"), " --runs " + copy));
  CHECK_THAT(without.output,
             Catch::Contains("2 finished, 0 diverged") && Catch::Contains("1 taken from the records in their folders"));
  // With it, nothing runs; the database holds what the first one did.
  for (auto q = a.prepare("SELECT id FROM jobs WHERE stage = 'pretrain'"); q.step();)
    test::spit((fs::path(runs) / q.text(0) / "best.safetensors").string(), "");
  auto second = test::run_command(fake_sweep(file, dir.file("second.db"), " --runs " + runs));
  INFO(second.output);
  CHECK_THAT(second.output,
             Catch::Contains("0 finished, 0 diverged") && Catch::Contains("3 taken from the records in their folders"));
  CHECK(count_starts(runs) == 3);
  Db b(dir.file("second.db"), true);
  const std::string jobs =
      "SELECT group_concat(stage || coords || status || COALESCE(cause, '') || attempts, ';') "
      "FROM (SELECT * FROM jobs ORDER BY stage, coords)";
  CHECK(query_text(a, jobs) == query_text(b, jobs));
  for (const char* table : {"metrics", "evals", "divergences"})
    CHECK(count(b, fmt::format("SELECT COUNT(*) FROM {}", table)) ==
          count(a, fmt::format("SELECT COUNT(*) FROM {}", table)));
  CHECK(count(b, "SELECT COUNT(*) FROM runs WHERE seconds > 0 AND status IN ('finished', 'diverged')") == 3);
  // A third sweep on that database: the results stand as any others do.
  auto third = test::run_command(fake_sweep(file, dir.file("second.db"), " --runs " + runs));
  CHECK_THAT(third.output, Catch::Contains("3 already done") && !Catch::Contains("taken from the records"));
}

TEST_CASE("fwlab: two sweeps on one database at once: no lock errors, every job run once", "[harness]") {
  test::TempDir dir("concurrent");
  const auto file = dir.file("c.toml");
  test::spit(file, slow_lr_grid("conc", 10, 8));
  const auto db_path = dir.file("fwlab.db");
  const auto cmd = fake_sweep(file, db_path, " --jobs 2");
  auto both = test::run_command(
      fmt::format("sh -c '({}) > {} 2>&1 & ({}) > {} 2>&1; wait'", cmd, dir.file("a.log"), cmd, dir.file("b.log")));
  const auto a = test::slurp(dir.file("a.log")), b = test::slurp(dir.file("b.log"));
  INFO(a << "\n---\n" << b);
  CHECK(a.find("database is locked") == std::string::npos);
  CHECK(b.find("database is locked") == std::string::npos);
  Db db(db_path, true);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 8);
  CHECK(count(db, "SELECT SUM(attempts) FROM jobs") == 8);  // nobody ran a job twice
  CHECK(count(db, "SELECT COUNT(*) FROM metrics") == 8 * 10);
  CHECK(count(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'finished'") == 2);
}

TEST_CASE(
    "experiment.seeds: every cell of the grid's stages N times from the shared teacher; seed 0 is the run without it",
    "[harness]") {
  test::TempDir dir("seeds");
  const auto file = dir.file("t.toml");
  test::spit(file, with(kBase, "seed = 0", "seed = 4") + "\n[profile.three]\n\"experiment.seeds\" = 3\n");
  const auto single = plan_jobs(load_experiment(file, ""), FWLAB_SOURCE_DIR, kFwlabVersion);
  const auto three = plan_jobs(load_experiment(file, "three"), FWLAB_SOURCE_DIR, kFwlabVersion);
  REQUIRE(single.size() == 5);  // pretrain + 4 finetune cells (one n/a)
  REQUIRE(three.size() == 1 + 4 * 3);
  CHECK(three[0].stage == "pretrain");
  CHECK(three[0].id == single[0].id);  // axes = []: one teacher, as without seeds
  std::map<int64_t, int> per_seed;
  for (size_t i = 1; i < three.size(); ++i) {
    const auto& j = three[i];
    CHECK(j.depends_on == three[0].id);
    CHECK(j.spec["seed"] == j.coords["seed"]);
    ++per_seed[j.coords["seed"].get<int64_t>()];
    // The first seed (defaults.seed) is the job the file makes without seeds: its finished results count.
    const bool same = std::any_of(single.begin(), single.end(), [&](const PlannedJob& s) { return s.id == j.id; });
    CHECK(same == (j.coords["seed"] == 4));
  }
  CHECK(per_seed == std::map<int64_t, int>{{4, 4}, {5, 4}, {6, 4}});
  // One of the seeds again, alone: --set grid.seed=[5] picks its jobs, the same ones.
  const auto fifth = plan_jobs(load_experiment(file, "three", {"grid.seed=[5]"}), FWLAB_SOURCE_DIR, kFwlabVersion);
  REQUIRE(fifth.size() == 1 + 4);
  for (size_t i = 1; i < fifth.size(); ++i)
    CHECK(std::any_of(three.begin(), three.end(),
                      [&](const PlannedJob& j) { return j.id == fifth[i].id && j.coords["seed"] == 5; }));
}

TEST_CASE("fwlab: dry run, status, query and show", "[harness]") {
  test::TempDir dir("cmds");
  const auto file = dir.file("t.toml");
  test::spit(file, kBase);
  const auto db_path = dir.file("fwlab.db");
  auto dry = test::run_command(fwlab_cmd(fmt::format("sweep {} --dry-run --db {}", file, db_path)));
  CHECK(dry.exit_code == 0);
  CHECK_THAT(dry.output, Catch::Contains("finetune   rule=decay variant=b") && Catch::Contains("n/a"));
  CHECK(!fs::exists(db_path));
  auto run = test::run_command(fake_sweep(file, db_path));
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK_THAT(test::run_command(fwlab_cmd(fmt::format("status --db {}", db_path))).output,
             Catch::Contains("t [no profile]: 5 cells: 4 finished, 1 n/a; done"));
  auto q = test::run_command(fwlab_cmd(fmt::format(
      "query \"SELECT stage, COUNT(*) AS n FROM jobs GROUP BY stage ORDER BY stage\" --format csv --db {}", db_path)));
  CHECK(q.output == "stage,n\nfinetune,3\npretrain,1\n");
  auto bad = test::run_command(fwlab_cmd(fmt::format("query \"DELETE FROM jobs\" --db {}", db_path)));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("queries may only read"));
  Db db(db_path, true);
  auto id = db.prepare("SELECT id FROM jobs WHERE stage = 'pretrain'");
  REQUIRE(id.step());
  auto show = test::run_command(fwlab_cmd(fmt::format("show {} --db {}", id.text(0).substr(0, 6), db_path)));
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.output, Catch::Contains("status finished") && Catch::Contains("train_loss       5 points"));
}

TEST_CASE("fwlab: SIGINT stops launching, interrupts running workers, leaves the database consistent", "[harness]") {
  test::TempDir dir("sigint");
  const auto file = dir.file("s.toml");
  test::spit(file, slow_lr_grid("sig", 40, 4));
  const auto db_path = dir.file("fwlab.db");
  const auto cmd = fake_sweep(file, db_path, " --jobs 2");
  auto r = test::run_command(fmt::format(
      "sh -c '{} > {} 2>&1 & pid=$!; sleep 0.7; kill -INT $pid; wait $pid; echo exit=$?'", cmd, dir.file("log")));
  CHECK_THAT(r.output, Catch::Contains("exit=130"));
  CHECK_THAT(test::slurp(dir.file("log")), Catch::Contains("interrupted: stopping 2 running job(s)"));
  {
    Db db(db_path, true);
    CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'interrupted'") == 2);
    CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'pending'") == 2);
    CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'running'") == 0);
    CHECK(count(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'interrupted'") == 1);
  }
  auto again = test::run_command(cmd);
  CHECK(again.exit_code == 0);
  Db db(db_path, true);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 4);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics") == 4 * 40);
}

TEST_CASE("fwlab: Ctrl-C to the whole process group, 20 times: running jobs interrupted, never crashed; resumes said",
          "[worker]") {
  // A terminal's Ctrl-C signals the sweep and its workers at once (so does `timeout -s INT`): the workers stop at a
  // step boundary, often before the sweep has seen its own signal. Each round interrupts the two jobs running.
  test::TempDir dir("ctrl_c");
  const auto file = dir.file("s.toml");
  test::spit(file, slow_lr_grid("ctrlc", 400, 2));
  const auto db_path = dir.file("fwlab.db");
  const auto cmd = fake_sweep(file, db_path, " --jobs 2");
  for (int round = 0; round < 20; ++round) {
    const auto r = test::run_command(fmt::format(
        "sh -c 'setsid {} > {} 2>&1 & pid=$!; sleep 0.{}; /bin/kill -s INT -- -$pid; wait $pid; echo exit=$?'", cmd,
        dir.file("log"), 4 + round % 5));
    INFO("round " << round << ": " << test::slurp(dir.file("log")));
    CHECK_THAT(r.output, Catch::Contains("exit=130"));
    Db db(db_path, true);
    CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status IN ('crashed', 'failed', 'running')") == 0);
    CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'interrupted'") == 2);
  }
  const auto last = test::run_command(cmd);
  INFO(last.output);
  CHECK(last.exit_code == 0);
  CHECK_THAT(last.output, Catch::Contains("(resumed from step ") &&
                              Catch::Contains("(2 of the finished and diverged resumed from an earlier attempt)"));
  Db db(db_path, true);
  CHECK(count(db, "SELECT COUNT(*) FROM runs WHERE status = 'finished' AND resumed_from_step > 0") == 2);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE key = 'train_loss'") == 2 * 400);  // each step once
  // Every attempt's output kept: 22 attempts' headers over the two logs.
  int headers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("runs"))) {
    const auto log = test::slurp((entry.path() / "worker.log").string());
    for (auto at = log.find("== fwlab: attempt started"); at != std::string::npos;
         at = log.find("== fwlab: attempt started", at + 1))
      ++headers;
  }
  CHECK(headers == 2 * 21);
}

TEST_CASE("fwlab: a worker that recorded its interruption but exits late is interrupted, not crashed", "[worker]") {
  // It wrote status interrupted at the signal, then took longer than the sweep's 10 s grace to exit, so the pool
  // killed it: Boost.Process keeps no exit status for a child it terminates (this read as "exit code -1" before).
  test::TempDir dir("late_exit");
  const auto file = dir.file("s.toml");
  test::spit(file,
             "[experiment]\nname = \"late\"\n[defaults]\nsteps = 400\nseed = 7\n[stage.run]\nmixer = \"softmax\"\n");
  const auto db_path = dir.file("fwlab.db");
  const auto r =
      test::run_command(fmt::format("sh -c 'setsid {} > {} 2>&1 & pid=$!; sleep 0.6; /bin/kill -s INT -- -$pid; "
                                    "wait $pid; echo exit=$?'",
                                    fake_sweep(file, db_path), dir.file("log")));
  INFO(test::slurp(dir.file("log")));
  CHECK_THAT(r.output, Catch::Contains("exit=130"));
  Db db(db_path, true);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'interrupted'") == 1);
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'crashed'") == 0);
}

TEST_CASE("ingestion is incremental and idempotent, and tolerates a torn last line", "[harness]") {
  test::TempDir dir("ingest");
  Db db(dir.file("fwlab.db"));
  db.exec("INSERT INTO jobs(id, status) VALUES('j', 'running')");
  const std::string lines =
      "{\"type\":\"start\",\"seq\":0,\"host\":\"h\",\"params\":7}\n"
      "{\"type\":\"metric\",\"seq\":1,\"step\":1,\"key\":\"train_loss\",\"value\":2.5,\"time\":1.0}\n"
      "{\"type\":\"metric\",\"seq\":2,\"step\":2,\"key\":\"train_loss\",\"value\":\"nan\",\"time\":2.0}\n";
  const std::string rest = "{\"type\":\"eval\",\"seq\":3,\"split\":\"valid\",\"step\":2,\"loss\":1.5,\"tokens\":9}\n";
  test::spit(dir.file("events.jsonl"), lines + rest.substr(0, 20));  // torn
  CHECK(ingest_events(db, "j", dir.path().string()) == 3);
  CHECK(ingest_events(db, "j", dir.path().string()) == 0);
  test::spit(dir.file("events.jsonl"), lines + rest);
  CHECK(ingest_events(db, "j", dir.path().string()) == 1);
  CHECK(ingest_events(db, "j", dir.path().string()) == 0);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics") == 2);
  CHECK(count(db, "SELECT COUNT(*) FROM metrics WHERE value IS NULL") == 1);  // "nan"
  CHECK(count(db, "SELECT COUNT(*) FROM evals WHERE loss = 1.5") == 1);
  CHECK(count(db, "SELECT params FROM jobs WHERE id = 'j'") == 7);
  // A crash after the rows but before the offset (simulated by rewinding it) adds nothing twice.
  db.exec("UPDATE jobs SET events_offset = 0 WHERE id = 'j'");
  ingest_events(db, "j", dir.path().string());
  CHECK(count(db, "SELECT COUNT(*) FROM metrics") == 2);
  CHECK(count(db, "SELECT COUNT(*) FROM events") == 2);  // start and eval; metrics have their own table
}

TEST_CASE("db: two processes creating the same new database at once both open it", "[harness]") {
  // Switching a new file to WAL while another connection reads it fails at once with SQLITE_BUSY, without the
  // busy handler; two sweeps starting together on a new database used to lose one of them that way.
  test::TempDir dir("dbinit");
  int failures = 0;
  for (int i = 0; i < 100; ++i) {
    const auto path = dir.file(fmt::format("r{}.db", i));
    std::vector<pid_t> kids;
    for (int k = 0; k < 2; ++k) {
      const pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        try {
          Db db(path);
          _exit(0);
        } catch (...) {
          _exit(1);
        }
      }
      kids.push_back(pid);
    }
    for (pid_t pid : kids) {
      int status = 0;
      waitpid(pid, &status, 0);
      failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("fwlab sweep: the [executor] table is checked like every other key; --detach needs a cluster", "[harness]") {
  test::TempDir dir("executor");
  const auto file = dir.file("e.toml"), db = dir.file("fwlab.db");
  auto refused = [&](const std::string& executor, const std::string& message) {
    test::spit(file, "[experiment]\nname = \"e\"\n[stage.run]\nmixer = \"softmax\"\n[executor]\n" + executor + "\n");
    const auto r = test::run_command(fake_sweep(file, db, " --executor slurm"));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(file + ":6:") && Catch::Contains(message));
    CHECK(!std::filesystem::exists(db));  // nothing was started or written
  };
  refused("time = \"2 days\"", "executor.time: '2 days' is not a Slurm time limit");
  refused("mem = \"lots\"", "executor.mem: 'lots' is not a Slurm memory size");
  refused("partition = \"gpu; rm -rf /\"", "executor.partition: 'gpu; rm -rf /' is not a Slurm name");
  refused("cpus = 0", "executor.cpus: must be in [1, 1024], got 0");
  refused("extra = [\"--array=0-3\"]", "executor.extra: '--array=0-3' is set by fwlab itself");
  refused("extra = [\"-p gpu\"]", "executor.extra: '-p gpu' is not an sbatch option");
  refused("kind = \"kubernetes\"", "executor.kind: 'kubernetes' is not an executor (local or slurm)");
  refused("partiton = \"gpu\"", "executor.partiton: unknown key (did you mean 'partition'?)");
  test::spit(file, "[experiment]\nname = \"e\"\n[stage.run]\nmixer = \"softmax\"\n");
  const auto detach = test::run_command(fake_sweep(file, db, " --detach"));
  CHECK(detach.exit_code == 2);
  CHECK_THAT(detach.output, Catch::Contains("--detach: only jobs on a cluster outlive fwlab"));
  CHECK(!std::filesystem::exists(db));
}

TEST_CASE("what an ending means: the worker's record first, then Slurm's final state; which endings are retried",
          "[harness]") {
  auto batch = [](const std::string& state) { return Ended{"j", Ended::How::batch, -1, state, ""}; };
  const StatusFile running{JobStatus::running, {}, "", "", nlohmann::json::object()};
  const StatusFile finished{JobStatus::finished, 0, "", "", nlohmann::json::object()};
  const StatusFile crashed{JobStatus::crashed, 1, "crash", "CUDA error", nlohmann::json::object()};
  const StatusFile interrupted{JobStatus::interrupted, 4, "interrupted", "stopped by signal", nlohmann::json::object()};
  struct Case {
    std::string state;
    std::optional<StatusFile> file;
    JobStatus status;
    bool retryable;
    std::string cause;
  };
  const std::vector<Case> cases = {
      {"TIMEOUT", running, JobStatus::timeout, true, "timeout"},
      {"DEADLINE", running, JobStatus::timeout, true, "deadline"},
      {"PREEMPTED", interrupted, JobStatus::interrupted, true, "preempted"},
      {"NODE_FAIL", running, JobStatus::crashed, true, "node_fail"},
      {"BOOT_FAIL", std::nullopt, JobStatus::crashed, true, "boot_fail"},
      {"OUT_OF_MEMORY", running, JobStatus::crashed, false, "out_of_memory"},
      {"CANCELLED", interrupted, JobStatus::cancelled, false, "cancelled"},
      {"CANCELLED", finished, JobStatus::finished, false, ""},  // the result was in before the cancel: it stands
      {"COMPLETED", finished, JobStatus::finished, false, ""},
      {"", finished, JobStatus::finished, false, ""},  // forgotten by squeue: the status file is the truth
      {"FAILED", crashed, JobStatus::crashed, true, "crash"},
      {"COMPLETED", interrupted, JobStatus::interrupted, true, "interrupted"},  // stopped, but not requeued
      {"", running, JobStatus::crashed, true, "lost"},
  };
  for (const auto& c : cases) {
    INFO(c.state << " with status file " << (c.file ? std::string(to_string(c.file->status)) : "none"));
    const auto v = judge(batch(c.state), c.file, false, true);
    CHECK(v.outcome.status == c.status);
    CHECK(v.retryable == c.retryable);
    CHECK(v.outcome.cause == (c.cause.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.cause)));
  }
  const auto unseen = judge(batch("FAILED"), std::nullopt, false, false);
  CHECK(unseen.outcome.status == JobStatus::crashed);
  CHECK(unseen.outcome.cause == "job_dir_unseen");
  CHECK(!unseen.retryable);
  // The local pool: exit codes and signals.
  CHECK(judge({"j", Ended::How::exited, 3, "", ""}, std::nullopt, false, true).outcome.status == JobStatus::diverged);
  CHECK(judge({"j", Ended::How::exited, 2, "", ""}, std::nullopt, false, true).outcome.cause == "bad_spec");
  CHECK(judge({"j", Ended::How::signaled, 9, "", ""}, std::nullopt, false, true).retryable);
  CHECK(judge({"j", Ended::How::signaled, 15, "", ""}, std::nullopt, true, true).outcome.status ==
        JobStatus::interrupted);
  CHECK(!judge({"j", Ended::How::launch_failed, -1, "", "no such file"}, std::nullopt, false, true).retryable);
}

TEST_CASE(
    "fwlab sweep --set: typed and validated like the file, errors name the --set; the jobs and the record follow it",
    "[harness]") {
  test::TempDir dir("set");
  const auto file = dir.file("t.toml");
  test::spit(file, kBase);
  const auto db_path = dir.file("fwlab.db");
  auto dry = [&](const std::string& sets) {
    return test::run_command(fwlab_cmd(fmt::format("sweep {} --dry-run --db {}{}", file, db_path, sets)));
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {" --set defaults.steps", "--set defaults.steps: expected KEY=VALUE"},
      {" --set defaults.model.d_modle=64", "--set defaults.model.d_modle=64: defaults.model.d_modle: unknown key"},
      {" --set stage.pretrian.steps=3",
       "--set stage.pretrian.steps=3: stage.pretrian.steps: 'stage.pretrian' is not defined in the file"},
      {" --set stage.finetune.steps=many",
       "--set stage.finetune.steps=many: stage.finetune.steps: must be an integer, got \"many\""},
      {" --set defaults.optim.lr=-1", "--set defaults.optim.lr=-1: defaults.optim.lr: must be positive"},
      {" --set stpes=3",
       "--set stpes=3: stpes: a key is a dotted path into the file, starting with defaults, stage, grid, "
       "preset, table or executor, or a job key such as optim.lr"},
  };
  for (const auto& [sets, message] : bad) {
    auto r = dry(sets);
    INFO(sets << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
  }
  CHECK(!fs::exists(db_path));
  // A value changes the jobs it reaches (their identities), TOML types included; bare words are strings.
  const auto plain = dry("").output, longer = dry(" --set stage.finetune.steps=7").output;
  auto id_of = [](const std::string& out, const std::string& cell) {
    const auto at = out.find(cell);
    return out.substr(at + 52, 16);
  };
  CHECK(id_of(plain, "pretrain   -") == id_of(longer, "pretrain   -"));
  CHECK(id_of(plain, "finetune   rule=add variant=a") != id_of(longer, "finetune   rule=add variant=a"));
  CHECK(dry(" --set 'grid.rule=[\"add\"]'").output.find("rule=decay") == std::string::npos);
  auto run = test::run_command(fake_sweep(file, db_path, " --set stage.finetune.steps=7"));
  INFO(run.output);
  CHECK(run.exit_code == 0);
  auto q =
      test::run_command(fwlab_cmd(fmt::format("query \"SELECT command FROM sweeps\" --format csv --db {}", db_path)));
  CHECK_THAT(q.output, Catch::Contains("--set stage.finetune.steps=7"));
  auto spec = nlohmann::json::parse(test::slurp(
      (fs::path(db_path).parent_path() / "runs" / id_of(longer, "finetune   rule=add variant=a") / "job.json")
          .string()));
  CHECK(spec["train"]["steps"] == 7);
}

TEST_CASE("fwlab: local workers wait passively for their OpenMP threads unless the user chose a policy", "[harness]") {
  test::TempDir dir("omp-policy");
  const auto file = dir.file("o.toml");
  test::spit(file, slow_lr_grid("omp", 2, 2));
  // A worker that notes the policy it was given, then is the fake worker.
  const auto worker = dir.file("noting_worker.sh");
  test::spit(worker, fmt::format("#!/bin/sh\nprintf '%s\\n' \"${{OMP_WAIT_POLICY-unset}}\" >> \"$2/omp_wait_policy\"\n"
                                 "exec {}/tests/fake_worker.py \"$@\"\n",
                                 FWLAB_SOURCE_DIR));
  fs::permissions(worker, fs::perms::owner_exec, fs::perm_options::add);
  for (const std::string policy : {"", "ACTIVE"}) {
    const auto db = dir.file(fmt::format("db{}/fwlab.db", policy));
    fs::create_directories(fs::path(db).parent_path());
    const auto env = policy.empty() ? std::string("env -u OMP_WAIT_POLICY ") : "env OMP_WAIT_POLICY=" + policy + " ";
    const auto r =
        test::run_command(env + fwlab_cmd(fmt::format("sweep {} --db {} --jobs 2 --worker {}", file, db, worker)));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    size_t jobs = 0;
    for (const auto& d : fs::directory_iterator(fs::path(db).parent_path() / "runs")) {
      CHECK(test::slurp((d.path() / "omp_wait_policy").string()) == (policy.empty() ? "PASSIVE\n" : policy + "\n"));
      ++jobs;
    }
    CHECK(jobs == 2);
  }
}
