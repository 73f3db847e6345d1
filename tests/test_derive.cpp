// Derived settings (harness/derive.h): each selector's layers computed by hand; waiting for inputs, refusing failed
// ones; the declaration's errors at load; and a sweep end to end with the fake worker (tests/fake_worker.py writes
// each probe's valid_kl from the layer it restores): two rounds, the recorded derivation, an idempotent re-run.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "harness/db.h"
#include "harness/derive.h"
#include "tests/test_support.h"

using namespace fwlab;
using fwlab::test::fwlab_cmd;

namespace {

// Statuses and metric values given by the test.
struct FakeResults : JobResults {
  std::map<std::string, JobStatus> statuses;
  std::map<std::pair<std::string, std::string>, double> values;
  std::optional<JobStatus> status(const std::string& id) const override {
    const auto it = statuses.find(id);
    return it == statuses.end() ? std::nullopt : std::optional<JobStatus>(it->second);
  }
  std::optional<double> value(const std::string& id, const std::string& metric) const override {
    const auto it = values.find({id, metric});
    return it == values.end() ? std::nullopt : std::optional<double>(it->second);
  }
};

Derivation derivation() {
  Derivation d;
  d.name = "layers", d.stage = "hybrid", d.selector_axis = "selector", d.count_axis = "k", d.probes = "probe";
  d.transfer = "transfer", d.seed = 3;
  return d;
}

nlohmann::json layers_of(const std::string& selector, int64_t k, int64_t L, const std::vector<DerivationInput>& in = {},
                         const JobResults* results = nullptr) {
  const auto d = derivation();
  const auto out = derive_layers({d, selector, k, L, "cell"}, in, results);
  REQUIRE(out.ready);
  return out.value;
}

}  // namespace

TEST_CASE("derived layers: the selectors that read nothing, by hand", "[harness]") {
  CHECK(layers_of("uniform", 1, 8) == nlohmann::json({4}));  // floor((2j + 1) * 8 / 2): the middle
  CHECK(layers_of("uniform", 2, 8) == nlohmann::json({2, 6}));
  CHECK(layers_of("uniform", 4, 8) == nlohmann::json({1, 3, 5, 7}));
  CHECK(layers_of("uniform", 3, 12) == nlohmann::json({2, 6, 10}));
  CHECK(layers_of("first", 3, 8) == nlohmann::json({0, 1, 2}));
  CHECK(layers_of("last", 2, 8) == nlohmann::json({6, 7}));
  const auto r = layers_of("random", 3, 8);
  CHECK(r.size() == 3);
  CHECK(layers_of("random", 3, 8) == r);  // the seed fixes it
  CHECK(std::is_sorted(r.begin(), r.end()));
  CHECK_THROWS_WITH(layers_of("first", 9, 8), Catch::Contains("asks for 9 layers of a model of 8"));
}

TEST_CASE("derived layers: probes ranked by their metric, transfer error per layer, waiting and failed inputs",
          "[harness]") {
  FakeResults res;
  std::vector<DerivationInput> probes;
  // Probe of layer i ends with valid_kl ((5 i) mod 8) / 10: ascending, layers 0, 5, 2, 7, 4, 1, 6, 3.
  for (int i = 0; i < 8; ++i) {
    const auto id = fmt::format("p{}", i);
    probes.push_back({id, nlohmann::json::array({i})});
    res.statuses[id] = JobStatus::finished;
    res.values[{id, "valid_kl"}] = ((5 * i) % 8) / 10.0;
    res.values[{id, "valid_ppl"}] = 10.0 - i;  // perplexity: the last layers best
  }
  CHECK(layers_of("kl_guided", 3, 8, probes, &res) == nlohmann::json({0, 2, 5}));
  CHECK(layers_of("perplexity", 2, 8, probes, &res) == nlohmann::json({6, 7}));
  const auto d = derivation();
  const auto record = derive_layers({d, "kl_guided", 3, 8, "cell"}, probes, &res).record;
  CHECK(record["ranking"][0]["job"] == "p0");
  CHECK(record["ranking"][1]["layers"] == nlohmann::json({5}));
  CHECK(record["ranking"][7]["score"].get<double>() == Approx(0.7));
  // Two transfer jobs (seeds): each layer's mean error, largest first.
  std::vector<DerivationInput> transfers = {{"t0", nullptr}, {"t1", nullptr}};
  for (int i = 0; i < 4; ++i) {
    res.values[{"t0", fmt::format("transfer_mse.{}", i)}] = i == 1 ? 5.0 : 1.0 + i;
    res.values[{"t1", fmt::format("transfer_mse.{}", i)}] = i == 2 ? 9.0 : 1.0;
  }
  res.statuses["t0"] = res.statuses["t1"] = JobStatus::finished;
  // Means: layer 0: 1, layer 1: 3, layer 2: 6, layer 3: 2.5.
  CHECK(layers_of("transfer_error", 2, 4, transfers, &res) == nlohmann::json({1, 2}));
  res.statuses["p4"] = JobStatus::running;
  const auto waits = derive_layers({d, "kl_guided", 2, 8, "stage hybrid, cell k=2"}, probes, &res);
  CHECK_FALSE(waits.ready);
  CHECK_THAT(waits.waiting, Catch::Contains("stage hybrid, cell k=2 waits for 1 of its 8 input job(s): p4"));
  res.statuses["p4"] = JobStatus::diverged;
  CHECK_THROWS_WITH(derive_layers({d, "kl_guided", 2, 8, "cell k=2"}, probes, &res),
                    Catch::Contains("derive.layers: kl_guided for cell k=2 reads jobs that ended without a result: "
                                    "p4 (diverged)"));
  res.statuses["p4"] = JobStatus::finished;
  res.values.erase({"p4", "valid_kl"});
  CHECK_THROWS_WITH(derive_layers({d, "kl_guided", 2, 8, "cell"}, probes, &res),
                    Catch::Contains("p4 (finished without valid_kl)"));
  CHECK_FALSE(derive_layers({d, "kl_guided", 2, 8, "cell"}, probes, nullptr).ready);  // no database: waiting
}

namespace {

// probe stage (one layer each), a derived hybrid stage; the fake worker writes valid_kl = ((5 i) mod 8) / 10.
const std::string kDerived = R"([experiment]
name = "derived"
[defaults]
steps = 5
seed = 0
[defaults.model]
n_layers = 8
[stage.teacher]
axes = []
mixer = "softmax"
[stage.probe]
axes = ["probe"]
from = "teacher"
mixer = "fast_weight"
norm = "none"
m = 4
[stage.hybrid]
axes = ["selector", "k"]
from = "teacher"
mixer = "fast_weight"
norm = "none"
m = 4
[derive.layers]
stage = "hybrid"
selector = "selector"
count = "k"
probes = "probe"
[grid]
probe = [[0], [1], [2], [3], [4], [5], [6], [7]]
selector = ["first", "kl_guided"]
k = [2, 3]
[axis.probe]
key = "model.keep_softmax_layers"
)";

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::string fake_sweep(const std::string& file, const std::string& db, const std::string& extra = "") {
  return fwlab_cmd(
      fmt::format("sweep {} --db {} -j 2 --worker {}/tests/fake_worker.py{}", file, db, FWLAB_SOURCE_DIR, extra));
}

}  // namespace

TEST_CASE("fwlab sweep: a derived stage waits for its probes, is planned from their results, recorded, never rerun",
          "[harness]") {
  test::TempDir dir("derived");
  const auto file = dir.file("d.toml"), db_path = dir.file("fwlab.db");
  test::spit(file, kDerived);
  const auto dry = test::run_command(fwlab_cmd(fmt::format("sweep {} --dry-run --db {}", file, db_path)));
  CHECK_THAT(dry.output, Catch::Contains("not planned yet (a derived setting reads results): stage hybrid, cell k=2 "
                                         "selector=kl_guided waits for 8 of its 8 input job(s)"));
  const auto r = test::run_command(fake_sweep(file, db_path));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("planned the cells whose derived settings' inputs have ended"));
  Db db(db_path, true);
  auto value_of = [&](const std::string& selector, int k) {
    auto q = db.prepare(
        "SELECT d.value, j.config FROM derivations d JOIN jobs j ON j.id = d.job_id WHERE "
        "json_extract(d.coords, '$.selector') = ? AND json_extract(d.coords, '$.k') = ?");
    q.bind(1, selector).bind(2, int64_t{k});
    REQUIRE(q.step());
    CHECK(nlohmann::json::parse(q.text(1))["model"]["keep_softmax_layers"] == nlohmann::json::parse(q.text(0)));
    return nlohmann::json::parse(q.text(0));
  };
  CHECK(value_of("first", 3) == nlohmann::json({0, 1, 2}));
  CHECK(value_of("kl_guided", 2) == nlohmann::json({0, 5}));  // valid_kl ascending: 0 (0.0), 5 (0.1), 2 (0.2), ...
  CHECK(value_of("kl_guided", 3) == nlohmann::json({0, 2, 5}));
  auto status = db.prepare("SELECT COUNT(*) FROM jobs WHERE stage = 'hybrid' AND status = 'finished'");
  REQUIRE(status.step());
  CHECK(status.integer(0) == 4);
  const auto again = test::run_command(fake_sweep(file, db_path));
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("0 finished") && Catch::Contains("13 already done"));
  CHECK_THAT(again.output, !Catch::Contains("fwlab: started"));
}

TEST_CASE("fwlab sweep: a job that crashed in the first round is not started again when derived cells are planned",
          "[harness]") {
  test::TempDir dir("derived_rounds");
  const auto file = dir.file("d.toml"), db_path = dir.file("fwlab.db");
  // A stage of its own whose job crashes (seed 1, the fake worker's crash), read by nothing derived.
  test::spit(file, kDerived + "[stage.extra]\naxes = []\nmixer = \"softmax\"\nseed = 1\n");
  const auto r = test::run_command(fake_sweep(file, db_path, " --retries 0"));
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("planned the cells whose derived settings' inputs have ended"));
  CHECK(occurrences(r.output, "fwlab: started extra -") == 1);
  Db db(db_path, true);
  auto hybrids = db.prepare("SELECT COUNT(*) FROM jobs WHERE stage = 'hybrid' AND status = 'finished'");
  REQUIRE(hybrids.step());
  CHECK(hybrids.integer(0) == 4);
}

TEST_CASE("fwlab sweep: a stage that starts from a derived stage waits with it, then runs", "[harness]") {
  test::TempDir dir("derived_chain");
  const auto file = dir.file("d.toml"), db_path = dir.file("fwlab.db");
  test::spit(file, kDerived + "[stage.tuned]\naxes = [\"selector\", \"k\"]\nfrom = \"hybrid\"\n");
  const auto dry = test::run_command(fwlab_cmd(fmt::format("sweep {} --dry-run --db {}", file, db_path)));
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK_THAT(dry.output, Catch::Contains("stage tuned, cell k=2 selector=kl_guided waits for the hybrid cell it "
                                         "starts from (k=2 selector=kl_guided)"));
  const auto r = test::run_command(fake_sweep(file, db_path));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  Db db(db_path, true);
  auto tuned = db.prepare("SELECT COUNT(*) FROM jobs WHERE stage = 'tuned' AND status = 'finished'");
  REQUIRE(tuned.step());
  CHECK(tuned.integer(0) == 4);
}

TEST_CASE("fwlab sweep: a derived stage whose probe failed stops, naming it; malformed declarations exit 2",
          "[harness]") {
  test::TempDir dir("derived_bad");
  const auto file = dir.file("d.toml"), db_path = dir.file("fwlab.db");
  // The probe of layer 3 crashes (the fake worker's seed 1): an extra cell in place of the grid's.
  auto text = kDerived;
  const std::string grid = "probe = [[0], [1], [2], [3], [4], [5], [6], [7]]";
  text.replace(text.find(grid), grid.size(), "probe = [[0], [1], [2], [4], [5], [6], [7]]");
  test::spit(file, text + "[[cell]]\nstage = \"probe\"\nprobe = [3]\nseed = 1\n");
  const auto r = test::run_command(fake_sweep(file, db_path, " --retries 0"));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("derive.layers: kl_guided for stage hybrid, cell k=2 selector=kl_guided reads "
                                       "jobs that ended without a result:") &&
                           Catch::Contains("(crashed)"));
  // The commands that read results show what the database holds instead of stopping at the failed input.
  const auto status = test::run_command(fwlab_cmd(fmt::format("status {} --db {}", file, db_path)));
  INFO(status.output);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.output, !Catch::Contains("ended without a result"));
  // --retry-failed runs the failed probe again first (once: --retries 0), then names it when it fails again.
  const auto retried = test::run_command(fake_sweep(file, db_path, " --retries 0 --retry-failed"));
  INFO(retried.output);
  CHECK(retried.exit_code == 1);
  CHECK(occurrences(retried.output, "fwlab: started probe probe=[3] [") == 1);
  CHECK_THAT(retried.output,
             Catch::Contains("reads jobs that ended without a result:") && Catch::Contains("(crashed)"));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"selector = \"selector\"", "selector = \"klguided\""},
      {"count = \"k\"", "count = \"kk\""},
      {"probes = \"probe\"\n", ""},
      {"probes = \"probe\"\n", "probes = \"probe\"\nseed = 4\n"},
      {"selector = [\"first\", \"kl_guided\"]", "selector = [\"first\", \"klguided\"]"},
      {"stage = \"hybrid\"\nselector", "stage = \"hybird\"\nselector"},
  };
  const std::vector<std::string> messages = {
      "grid.selector: axis 'selector' sets no job key and has no [preset.selector.*] tables, and no [derive.NAME] "
      "section names it as its selector or count",
      "grid.k: axis 'k' sets no job key and has no [preset.k.*] tables (did you mean 'm'?), and no [derive.NAME] "
      "section names it as its selector or count",
      "derive.layers: a selector here reads the stage given by `probes`: name it",
      "derive.layers.seed: only the random selector draws: it would change nothing",
      "grid.selector: 'klguided' is not a selector (uniform, first, last, random, transfer_error, kl_guided, "
      "perplexity) (did you mean 'kl_guided'?)",
      "derive.layers.stage: stage 'hybird' does not exist (did you mean 'hybrid'?)",
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto text = kDerived;
    text.replace(text.find(bad[i].first), bad[i].first.size(), bad[i].second);
    test::spit(file, text);
    const auto out = test::run_command(fwlab_cmd(fmt::format("sweep {} --dry-run --db {}", file, dir.file("x.db"))));
    INFO(out.output);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains(file + ":") && Catch::Contains(messages[i]));
  }
}
