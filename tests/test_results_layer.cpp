// Results a person can watch and question: the sweep's and the worker's lines without a terminal, the runs and
// params views, query's JSON, diff, show --curve, --version, unknown commands, --set that would do nothing,
// and the data problems a sweep finds before it starts.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/site.h"
#include "harness/db.h"
#include "harness/ingest.h"
#include "tests/test_support.h"

using namespace fwlab;
using fwlab::test::fake_worker;
using fwlab::test::fwlab_cmd;
namespace fs = std::filesystem;

namespace {

// Two stages over two rules; the file's [defaults.optim] lr is the more specific setting of the learning rate.
const std::string kGrid = R"([experiment]
name = "layer"

[defaults]
steps = 4
seed = 0

[defaults.optim]
lr = 0.001

[stage.pretrain]
mixer = "fast_weight"
m = 4
norm = "none"

[grid]
rule = ["add", "decay"]

[[not_applicable]]
rule = "decay"
)";

struct Swept {
  test::TempDir dir{"layer"};
  std::string file = dir.file("g.toml"), db = dir.file("fwlab.db");
  test::CommandResult run;
  explicit Swept(const std::string& text = kGrid, const std::string& extra = "") {
    test::spit(file, text);
    run = test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {}{} > {} 2>&1; cat {}", file, db,
                                                  fake_worker(), extra, dir.file("log"), dir.file("log"))));
  }
};

std::string job_of(const std::string& db_path, const std::string& where) {
  Db db(db_path, true);
  auto q = db.prepare("SELECT id FROM jobs WHERE " + where);
  REQUIRE(q.step());
  return q.text(0);
}

}  // namespace

TEST_CASE("results: a sweep without a terminal prints a line per job start and end, and a summary", "[results]") {
  Swept s(kGrid, " --set grid.rule='[\"add\",\"delta\"]'");
  INFO(s.run.output);
  const auto add = job_of(s.db, "coords LIKE '%\"add\"%'");
  CHECK_THAT(s.run.output, Catch::Contains(fmt::format("fwlab: started pretrain rule=add [{}]", add)));
  CHECK_THAT(s.run.output, Catch::Contains(fmt::format(
                               "fwlab: finished pretrain rule=add [{}]: valid loss 0.5000 (best, step 4) in ", add)));
  CHECK_THAT(s.run.output,
             Catch::Contains("fwlab: 2/2 jobs ended, 0 running, 0 unsuccessful") && Catch::Contains("done"));
}

TEST_CASE(
    "results: the runs view has the best and final validation, the test result and ISO times; params one row per key",
    "[results]") {
  test::TempDir dir("runs");
  Db db(dir.file("fwlab.db"));
  db.exec(
      "INSERT INTO jobs(id, experiment, stage, coords, config, status, started, finished, dir) VALUES('j', 'e', 's', "
      "'{}', "
      "'{\"optim\": {\"lr\": 0.003}, \"model\": {\"mixer\": {\"rule\": \"delta\"}}, \"bench\": {\"seq_lens\": [1, "
      "2]}}', "
      "'finished', 86400, 86461.5, '/abs/runs/j')");
  db.exec("INSERT INTO cells VALUES('e', 'quick', 's', '{}', 'j', 1), ('other', '', 's', '{}', 'j', 1)");
  test::spit(dir.file("events.jsonl"),
             "{\"type\":\"eval\",\"seq\":0,\"split\":\"valid\",\"step\":10,\"loss\":2.0,\"ppl\":7.389,\"tokens\":9}\n"
             "{\"type\":\"eval\",\"seq\":1,\"split\":\"valid\",\"step\":20,\"loss\":1.5,\"ppl\":4.482,\"tokens\":9}\n"
             "{\"type\":\"eval\",\"seq\":2,\"split\":\"valid\",\"step\":30,\"loss\":1.7,\"ppl\":5.474,\"tokens\":9}\n"
             "{\"type\":\"eval\",\"seq\":3,\"split\":\"test\",\"step\":20,\"checkpoint\":\"best\",\"loss\":1.6,\"ppl\":"
             "4.953,\"tokens\":9}\n"
             "{\"type\":\"metric\",\"seq\":4,\"step\":30,\"key\":\"train_loss\",\"value\":1.25}\n"
             "{\"type\":\"metric\",\"seq\":5,\"step\":29,\"key\":\"train_loss\",\"value\":1.5}\n");
  ingest_events(db, "j", dir.path().string());
  auto q = db.prepare(
      "SELECT experiments, best_valid_step, best_valid_loss, final_valid_step, final_valid_loss, test_loss, "
      "final_train_loss, started, finished, seconds, dir FROM runs WHERE job_id = 'j'");
  REQUIRE(q.step());
  CHECK((q.text(0) == "e,other" || q.text(0) == "other,e"));
  CHECK(q.integer(1) == 20);
  CHECK(q.real(2) == 1.5);
  CHECK(q.integer(3) == 30);
  CHECK(q.real(4) == 1.7);
  CHECK(q.real(5) == 1.6);
  CHECK(q.real(6) == 1.25);  // the last step's, not the last line's
  CHECK(q.text(7) == "1970-01-02T00:00:00Z");
  CHECK(q.text(8) == "1970-01-02T00:01:01Z");
  CHECK(q.real(9) == 61.5);
  CHECK(q.text(10) == "/abs/runs/j");
  auto p = db.prepare("SELECT key, value FROM params WHERE job_id = 'j' ORDER BY key");
  std::vector<std::pair<std::string, std::string>> params;
  while (p.step()) params.emplace_back(p.text(0), p.text(1));
  CHECK(params == std::vector<std::pair<std::string, std::string>>{
                      {"bench.seq_lens", "[1,2]"}, {"model.mixer.rule", "delta"}, {"optim.lr", "0.003"}});
}

TEST_CASE("results: query takes SQLite's JSON table functions and --format json nests JSON; diff and show --curve",
          "[results]") {
  Swept s(kGrid, " --set grid.rule='[\"add\",\"delta\"]'");
  REQUIRE(s.run.exit_code == 0);
  // The hyperparameters of the best cell, in one query.
  const auto best =
      test::run_command(fwlab_cmd(fmt::format("query --format csv --db {} \"SELECT p.key, p.value FROM params p WHERE "
                                              "p.key = 'model.mixer.rule' AND p.job_id = "
                                              "(SELECT r.job_id FROM runs r JOIN cells c ON c.job_id = r.job_id WHERE "
                                              "c.experiment = 'layer' ORDER BY r.best_valid_loss, r.job_id LIMIT 1)\"",
                                              s.db)));
  INFO(best.output);
  CHECK(best.exit_code == 0);
  CHECK_THAT(best.output, Catch::StartsWith("key,value\nmodel.mixer.rule,"));
  const auto each =
      test::run_command(fwlab_cmd(fmt::format("query --format csv --db {} \"SELECT e.key, e.value FROM jobs j, "
                                              "json_each(j.config, '$.optim') e WHERE j.coords LIKE '%add%'\"",
                                              s.db)));
  CHECK(each.output == "key,value\nlr,0.001\n");
  const auto json = test::run_command(fwlab_cmd(
      fmt::format("query --format json --db {} \"SELECT coords, config FROM jobs ORDER BY id LIMIT 1\"", s.db)));
  const auto parsed = nlohmann::json::parse(json.output);
  CHECK(parsed[0]["config"]["optim"]["lr"] == 0.001);
  CHECK(parsed[0]["coords"].is_object());

  const auto add = job_of(s.db, "coords LIKE '%\"add\"%'"), delta = job_of(s.db, "coords LIKE '%\"delta\"%'");
  const auto diff =
      test::run_command(fwlab_cmd(fmt::format("diff {} {} --db {}", add.substr(0, 7), delta.substr(0, 7), s.db)));
  INFO(diff.output);
  CHECK(diff.exit_code == 0);
  CHECK_THAT(diff.output, Catch::Contains("settings: 1 differ") && Catch::Contains("model.mixer.rule") &&
                              Catch::Contains("add") && Catch::Contains("delta") &&
                              Catch::Contains("results: the same"));

  const auto curve = test::run_command(fwlab_cmd(fmt::format("show {} --curve train_loss --db {}", add, s.db)));
  CHECK(curve.output ==
        "step,train_loss\n1,1\n2,0.5\n3,0.3333333333333333\n4,0.25\n");  // the fake worker writes 1/step
  const auto csv = s.dir.file("curve.csv");
  CHECK(test::run_command(fwlab_cmd(fmt::format("show {} --curve valid.loss --out {} --db {}", add, csv, s.db)))
            .exit_code == 0);
  CHECK(test::slurp(csv) == "step,valid.loss\n4,0.5\n");
  const auto bad = test::run_command(fwlab_cmd(fmt::format("show {} --curve train_los --db {}", add, s.db)));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("has no such curve (did you mean 'train_loss'?)"));
}

TEST_CASE("results: --version, and an unknown command named with the nearest one", "[results]") {
  const auto version = test::run_command(fwlab_cmd("--version"));
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::StartsWith("fwlab ") && Catch::Contains("(commit "));
  const auto unknown = test::run_command(fwlab_cmd("frobnicate"));
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output,
             Catch::Contains("fwlab: unknown command 'frobnicate'") && Catch::Contains("commands: sweep"));
  CHECK_THAT(test::run_command(fwlab_cmd("shwo x")).output,
             Catch::Contains("unknown command 'shwo' (did you mean 'show'?)"));
}

TEST_CASE("results: a --set that changes no job is refused naming the setting that wins; job keys hold everywhere",
          "[results]") {
  test::TempDir dir("sets");
  const auto file = dir.file("g.toml"), db = dir.file("fwlab.db");
  test::spit(file, kGrid);
  auto sweep = [&](const std::string& sets) {
    return test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {} {}", file, db, fake_worker(), sets)));
  };
  const auto shadowed = sweep("--set defaults.lr=3e-4");
  INFO(shadowed.output);
  CHECK(shadowed.exit_code == 2);
  CHECK_THAT(shadowed.output,
             Catch::Contains("--set defaults.lr=3e-4: changes no job: it is shadowed by defaults.optim.lr (") &&
                 Catch::Contains("g.toml:9:6), which sets the same job key optim.lr"));
  CHECK_FALSE(fs::exists(db));
  CHECK_THAT(sweep("--set seed=0").output,
             Catch::Contains("--set seed=0: changes no job: every job already has that value"));
  CHECK(sweep("--set defaults.lr=3e-4 --force --dry-run").exit_code == 0);
  const auto axis = sweep("--set rule=add");
  CHECK(axis.exit_code == 2);
  CHECK_THAT(
      axis.output,
      Catch::Contains(
          "--set rule: the grid's axis 'rule' varies model.mixer.rule: choose its values with --set grid.rule=[...]"));
  // A job key: every job takes it; the [[not_applicable]] rule about "decay", outside the subset, is set aside.
  const auto job_key = sweep("--set optim.lr=3e-4 --set grid.rule='[\"add\"]'");
  INFO(job_key.output);
  REQUIRE(job_key.exit_code == 0);
  const auto lr = test::run_command(
      fwlab_cmd(fmt::format("query --format csv --db {} \"SELECT value FROM params WHERE key = 'optim.lr'\"", db)));
  CHECK(lr.output == "value\n0.0003\n");
  // status with the same --set shows the same cells; without it, the file's own (one new, one n/a).
  CHECK_THAT(test::run_command(
                 fwlab_cmd(fmt::format("status {} --db {} --set optim.lr=3e-4 --set grid.rule='[\"add\"]'", file, db)))
                 .output,
             Catch::Contains("layer [no profile]: 1 cells: 1 finished; done"));
  CHECK_THAT(test::run_command(fwlab_cmd(fmt::format("status {} --db {}", file, db))).output,
             Catch::Contains("layer [no profile]: 2 cells: 1 n/a, 1 new;"));
}

TEST_CASE("results: the dry run names the settings that differ between cells", "[results]") {
  test::TempDir dir("dry");
  test::spit(dir.file("g.toml"), kGrid);
  const auto r = test::run_command(fwlab_cmd(fmt::format(
      "sweep {} --dry-run --db {} --set grid.rule='[\"add\",\"delta\"]'", dir.file("g.toml"), dir.file("fwlab.db"))));
  INFO(r.output);
  CHECK_THAT(
      r.output,
      Catch::Contains(
          "settings that differ between the 2 cells of stage pretrain:\n  model.mixer.rule: \"add\" | \"delta\"\n"));
}

TEST_CASE(
    "results: token ids past the model's vocabulary and an enwik8 file too small to split stop the sweep before it "
    "starts",
    "[results]") {
  test::TempDir dir("preflight");
  const auto tokens = dir.path() / "tokens";
  fs::create_directories(tokens);
  std::string train(200, '\0');
  train[150] = '\x2c';
  train[151] = '\x01';  // little-endian uint16: 0x012c = 300
  test::spit((tokens / "train.bin").string(), train);
  test::spit((tokens / "val.bin").string(), std::string(100, '\0'));
  test::spit(dir.file("enwik8"), std::string(18, 'x'));
  const auto file = dir.file("p.toml"), db = dir.file("fwlab.db");
  test::spit(file, fmt::format(R"([experiment]
name = "preflight"
[defaults]
steps = 2
vocab = 256
[stage.s]
mixer = "softmax"
[grid]
corpus = ["tokens", "enwik8"]
[preset.corpus.tokens]
data = {{ source = "tokens", path = "{}" }}
[preset.corpus.enwik8]
data = {{ source = "enwik8", path = "{}" }}
)",
                               tokens.string(), dir.file("enwik8")));
  const auto r = test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, db, fake_worker())));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains("train.bin: token id 300 is outside the model's vocabulary of 256 (ids 0..255)"));
  CHECK_THAT(r.output, Catch::Contains("enwik8: 18 bytes is too small to split 90/5/5"));
  CHECK_FALSE(fs::exists(db));
  CHECK_FALSE(fs::exists(dir.path() / "runs"));
}

TEST_CASE("results: fwlab site writes escaped, linked pages; fwlab serve serves them read-only on loopback",
          "[results]") {
  const std::string planted = "<script>alert(\"x\")</script>'";
  const auto text = kGrid + "\n[table]\nrows = [\"rule\"]\nmetric = \"valid_loss\"\nlabels = { add = \"" +
                    std::string("<script>alert(\\\"x\\\")</script>'") + "\" }\n";
  Swept s(text);
  REQUIRE(s.run.exit_code == 0);
  const auto out = s.dir.file("site");
  const auto site = test::run_command(fwlab_cmd(fmt::format("site {} --db {} --out {}", s.file, s.db, out)));
  INFO(site.output);
  REQUIRE(site.exit_code == 0);
  CHECK_THAT(site.output, Catch::Contains("1 experiment page(s), 1 job page(s)"));
  const auto index = test::slurp(out + "/index.html"), page = test::slurp(out + "/e/layer.html");
  CHECK_THAT(index, Catch::Contains("<a href=\"e/layer.html\">layer</a>") && Catch::Contains("1 finished"));
  CHECK_THAT(page,
             Catch::Contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;") && !Catch::Contains(planted));
  CHECK_THAT(page, Catch::Contains("Content-Security-Policy\" content=\"default-src 'none'"));
  const auto add = job_of(s.db, "coords LIKE '%\"add\"%'");
  CHECK_THAT(page, Catch::Contains(fmt::format("<td><a href=\"../job/{}.html\">0.50</a></td>", add)));
  CHECK_THAT(test::slurp(out + "/job/" + add + ".html"),
             Catch::Contains("<svg class=\"chart\"") && Catch::Contains("train_loss"));

  // serve: a free loopback port, the same index, the policy as a header; a job that does not exist is a 404.
  const auto log = s.dir.file("serve.log"), client = s.dir.file("client.py");
  test::spit(client,
             "import sys, urllib.request, urllib.error\n"
             "r = urllib.request.urlopen(sys.argv[1] + 'index.html')\n"
             "print(sys.argv[1], r.headers['Content-Security-Policy'])\nprint(r.read().decode())\n"
             "try:\n    urllib.request.urlopen(sys.argv[1] + 'job/nope.html')\nexcept urllib.error.HTTPError as e:\n   "
             " print('status', e.code)\n");
  const auto served = test::run_command(
      fmt::format("{} serve {} --db {} --port 0 > {} 2>&1 & pid=$!; for i in $(seq 100); do grep -q 'http://' {} && "
                  "break; sleep 0.1; done; "
                  "/usr/bin/python3 {} \"$(sed -n 's/.* at \\(http:[^ ]*\\) .*/\\1/p' {})\"; kill $pid",
                  FWLAB_BIN, s.file, s.db, log, log, client, log));
  INFO(served.output);
  CHECK_THAT(served.output, Catch::StartsWith("http://127.0.0.1:") && Catch::Contains("default-src 'none'"));
  CHECK_THAT(served.output, Catch::Contains("<a href=\"e/layer.html\">layer</a>") && Catch::Contains("status 404"));
}

TEST_CASE("results: a script planted in a caption and in a setting's value is text on every page of the site",
          "[results]") {
  // A preset's name is a setting value: it reaches the table's rows, the curves' legends, the runs pages' columns
  // and filter links, and the job pages' settings.
  Swept s(R"([experiment]
name = "planted"
[defaults]
steps = 4
[stage.pretrain]
mixer = "fast_weight"
m = 4
norm = "none"
[grid]
variant = ["<script>alert('v')</script>", "plain"]
seed = [0, 3]
[preset.variant."<script>alert('v')</script>"]
rule = "add"
[preset.variant.plain]
rule = "decay"
[table]
rows = ["variant"]
columns = ["seed"]
metric = "valid_loss"
caption = "caption <script>alert('c')</script> *emphasis*"
)");
  REQUIRE_THAT(s.run.output, Catch::Contains("2 finished, 2 diverged"));  // the fake worker diverges at seed 3
  const auto out = s.dir.file("site");
  REQUIRE(test::run_command(fwlab_cmd(fmt::format("site {} --db {} --out {}", s.file, s.db, out))).exit_code == 0);
  size_t pages = 0;
  for (const auto& f : fs::recursive_directory_iterator(out)) {
    if (!f.is_regular_file()) continue;
    ++pages;
    auto text = test::slurp(f.path().string());
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    INFO(f.path().string());
    CHECK_THAT(text, !Catch::Contains("<script"));
  }
  CHECK(pages == 1 + 1 + 4 + (1 + 2 * 5 + 2 + 2 + 2));  // index, experiment, jobs, runs (5 columns, 3 filters)
  const auto page = test::slurp(out + "/e/planted.html");
  CHECK_THAT(page, Catch::Contains("caption &lt;script&gt;alert('c')&lt;/script&gt; <em>emphasis</em>"));
  CHECK_THAT(page, Catch::Contains("row &lt;script&gt;alert(&#39;v&#39;)&lt;/script&gt;, one line per column"));
  CHECK_THAT(test::slurp(out + "/e/planted.runs.html"),
             Catch::Contains("<td class=\"label\">&lt;script&gt;alert(&#39;v&#39;)&lt;/script&gt;</td>") &&
                 Catch::Contains(">&lt;script&gt;alert(&#39;v&#39;)&lt;/script&gt;</a>"));
}

TEST_CASE("results: export --format mlflow writes MLflow's file store layout; tensorboard is refused with the reason",
          "[results]") {
  Swept s(kGrid, " --set grid.rule='[\"add\",\"delta\"]'");
  REQUIRE(s.run.exit_code == 0);
  const auto out = s.dir.file("mlruns");
  const auto r = test::run_command(fwlab_cmd(fmt::format("export --format mlflow --out {} --db {}", out, s.db)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("1 experiment(s), 2 run(s)"));
  CHECK_THAT(test::slurp(out + "/0/meta.yaml"),
             Catch::Contains("name: 'Default'") && Catch::Contains("experiment_id: '0'"));
  CHECK_THAT(test::slurp(out + "/1/meta.yaml"),
             Catch::Contains("name: 'layer'") && Catch::Contains("lifecycle_stage: active"));
  const auto add = job_of(s.db, "coords LIKE '%\"add\"%'");
  const auto run = out + "/1/" + add;
  const auto meta = test::slurp(run + "/meta.yaml");
  CHECK_THAT(meta, Catch::Contains("run_id: " + add + "\n") && Catch::Contains("status: 3\n") &&
                       Catch::Contains("run_name: 'pretrain rule=add'") && Catch::Contains("experiment_id: '1'"));
  CHECK(test::slurp(run + "/params/optim.lr") == "0.001");
  CHECK(test::slurp(run + "/params/model.mixer.rule") == "add");
  CHECK(test::slurp(run + "/tags/mlflow.runName") == "pretrain rule=add");
  // The fake worker's curve, 1/step at steps 1..4, one "timestamp value step" line each.
  const auto train = test::slurp(run + "/metrics/train_loss");
  CHECK(std::count(train.begin(), train.end(), '\n') == 4);
  CHECK_THAT(train, Catch::Contains(" 0.25 4\n") && Catch::Contains(" 1 1\n"));
  CHECK_THAT(test::slurp(run + "/metrics/valid_loss"), Catch::EndsWith(" 0.5 4\n"));
  const auto tb = test::run_command(fwlab_cmd(fmt::format("export --format tensorboard --out {} --db {}", out, s.db)));
  CHECK(tb.exit_code == 2);
  CHECK_THAT(tb.output, Catch::Contains("not written (TensorBoard's event files are CRC32C-framed protobuf records"));
}

TEST_CASE("results: served pages of running work reload themselves; static pages and finished work never do",
          "[results]") {
  test::TempDir dir("live");
  test::spit(dir.file("g.toml"), kGrid);
  Db db(dir.file("fwlab.db"));
  db.exec("INSERT INTO cells VALUES('layer', '', 'pretrain', '{\"rule\":\"add\"}', 'j', 1)");
  db.exec(
      "INSERT INTO jobs(id, experiment, stage, coords, config, status) VALUES('j', 'layer', 'pretrain', "
      "'{\"rule\":\"add\"}', '{}', 'running')");
  const auto entries = site_entries(db, {dir.file("g.toml")});
  REQUIRE(entries.size() == 1);
  const SiteContext live{FWLAB_SOURCE_DIR, "v", "gnuplot", true}, still{FWLAB_SOURCE_DIR, "v", "gnuplot", false};
  const std::string refresh = "<meta http-equiv=\"refresh\" content=\"10\">";
  CHECK_THAT(index_page(db, entries, live), Catch::Contains(refresh));
  CHECK_THAT(*job_page(db, "j", live), Catch::Contains(refresh));
  CHECK_THAT(index_page(db, entries, still), !Catch::Contains(refresh));
  db.exec("UPDATE jobs SET status = 'finished'");
  CHECK_THAT(index_page(db, entries, live), !Catch::Contains(refresh));
  CHECK_THAT(*job_page(db, "j", live), !Catch::Contains(refresh));
  CHECK_FALSE(job_page(db, "nope", live).has_value());
}
