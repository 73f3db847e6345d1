// The Slurm launcher against a real single-node Slurm on localhost (tests/run_slurm_tests.sh starts it with
// scripts/slurm_cluster.sh and sets SLURM_CONF; the tests are hidden from a plain run of the binary).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/db.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using namespace fwlab;
using fwlab::test::fake_worker;
using fwlab::test::fwlab_cmd;

namespace {

// Two stages (finetune after pretrain), three finetune cells: two waves, the second only after the first.
std::string two_stage(const std::string& name, int seed) {
  return fmt::format(R"([experiment]
name = "{}"
[defaults]
steps = 5
seed = {}
[stage.pretrain]
axes = []
mixer = "softmax"
[stage.finetune]
from = "pretrain"
mixer = "fast_weight"
m = 4
[grid]
rule = ["add", "delta", "decay"]
)",
                     name, seed);
}

int64_t scalar(const std::string& db_path, const std::string& sql) {
  Db db(db_path, true);
  auto q = db.prepare(sql);
  REQUIRE(q.step());
  return q.integer(0);
}

std::string text(const std::string& db_path, const std::string& sql) {
  Db db(db_path, true);
  auto q = db.prepare(sql);
  REQUIRE(q.step());
  return q.text(0);
}

// Lines of the fake worker's `starts` file in every job directory: how often each job was started.
std::map<std::string, int> starts(const fs::path& runs) {
  std::map<std::string, int> out;
  for (const auto& d : fs::directory_iterator(runs)) {
    if (!d.is_directory() || d.path().filename().string()[0] == '.') continue;
    std::ifstream in(d.path() / "starts");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    out[d.path().filename().string()] = n;
  }
  return out;
}

// Runs `fwlab sync` until no cluster sweep is in flight (at most `limit_s` seconds).
void sync_until_done(const std::string& db, double limit_s = 120) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < limit_s) {
    const auto r = test::run_command(fwlab_cmd(fmt::format("sync --db {}", db)));
    INFO(r.output);
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));
    if (scalar(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'running'") == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  FAIL("the cluster sweep did not end in time");
}

// Waits until the job's worker has started (the fake worker's `starts` file).
void wait_started(const fs::path& job_dir) {
  for (int i = 0; i < 300; ++i) {
    if (fs::exists(job_dir / "starts")) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL("the worker in " << job_dir << " never started");
}

}  // namespace

TEST_CASE("slurm: detach, then sync until done: two waves, each job run once, two syncs at once agree", "[.slurm]") {
  REQUIRE(std::getenv("SLURM_CONF"));
  test::TempDir dir("slurm-detach");
  const auto file = dir.file("t.toml"), db = dir.file("r.db");
  test::spit(file, two_stage("detach", 0));
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::run_command(
      fwlab_cmd(fmt::format("sweep {} --db {} --worker {} --executor slurm --detach", file, db, fake_worker())));
  const double submit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(submit_s < 5);  // it did not wait for the jobs
  CHECK_THAT(r.output, Catch::Contains("1 in flight") && Catch::Contains("3 waiting for others") &&
                           Catch::Contains("fwlab sync"));
  CHECK(scalar(db,
               "SELECT COUNT(*) FROM jobs WHERE status IN ('submitted', 'running') AND launcher = 'slurm' AND batch_id "
               "LIKE '%\\_0' ESCAPE '\\'") == 1);
  // Two orchestrators reconcile the same database at once, again and again: they take turns, none submits twice.
  for (int i = 0; i < 20 && scalar(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'running'") > 0; ++i) {
    const auto both = test::run_command(
        fmt::format("{0} sync --db {1} > /dev/null & {0} sync --db {1} > /dev/null; wait", FWLAB_BIN, db));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  sync_until_done(db);
  CHECK(scalar(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 4);
  CHECK(scalar(db, "SELECT COUNT(DISTINCT submit_token) FROM jobs") == 2);  // two waves: pretrain, then the finetunes
  CHECK(scalar(db, "SELECT COUNT(*) FROM waves") == 2);
  CHECK(scalar(db, "SELECT COUNT(*) FROM metrics") == 4 * 5);  // every record ingested
  for (const auto& [job, n] : starts(dir.path() / "runs")) CHECK(n == 1);
  // The finetunes started from the pretrained job's checkpoint path, and their logs are in their directories.
  const auto status = test::run_command(fwlab_cmd(fmt::format("status --db {}", db)));
  CHECK_THAT(status.output, Catch::Contains("4 cells: 4 finished; done"));
  CHECK(text(db, "SELECT status FROM sweeps ORDER BY id LIMIT 1") == "finished");
  const auto finetune = text(db, "SELECT id FROM jobs WHERE stage = 'finetune' LIMIT 1");
  CHECK(fs::exists(dir.path() / "runs" / finetune / "slurm.log"));
  CHECK(fs::exists(dir.path() / "runs" / finetune / "slurm_job.json"));
}

TEST_CASE("slurm: scancel of a running job is recorded as cancelled and not retried", "[.slurm]") {
  REQUIRE(std::getenv("SLURM_CONF"));
  test::TempDir dir("slurm-cancel");
  const auto file = dir.file("t.toml"), db = dir.file("r.db");
  test::spit(
      file,
      "[experiment]\nname = \"cancel\"\n[defaults]\nseed = 2\n[stage.run]\nmixer = \"softmax\"\n");  // seed 2: hangs
  const auto r = test::run_command(fwlab_cmd(
      fmt::format("sweep {} --db {} --worker {} --executor slurm --detach --retries 3", file, db, fake_worker())));
  REQUIRE(r.exit_code == 0);
  const auto batch_id = text(db, "SELECT batch_id FROM jobs");
  wait_started(dir.path() / "runs" / text(db, "SELECT id FROM jobs"));
  REQUIRE(test::run_command(fmt::format("scancel {}", batch_id)).exit_code == 0);
  sync_until_done(db, 60);
  CHECK(text(db, "SELECT status FROM jobs") == "cancelled");
  CHECK(text(db, "SELECT cause FROM jobs") == "cancelled");
  CHECK(scalar(db, "SELECT attempts FROM jobs") == 1);
  CHECK(scalar(db, "SELECT retries_used FROM jobs") == 0);
  CHECK(text(db, "SELECT status FROM sweeps") == "failed");
  for (const auto& [job, n] : starts(dir.path() / "runs")) CHECK(n == 1);
}

TEST_CASE("slurm: a job whose directory the node cannot see fails clearly", "[.slurm]") {
  REQUIRE(std::getenv("SLURM_CONF"));
  test::TempDir dir("slurm-unseen");
  const auto file = dir.file("t.toml"), db = dir.file("r.db");
  // The job starts 3 s after submission; its directory is gone by then, as on a node that does not mount it.
  test::spit(
      file,
      "[experiment]\nname = \"unseen\"\n[stage.run]\nmixer = \"softmax\"\n[executor]\nextra = [\"--begin=now+3\"]\n");
  REQUIRE(test::run_command(
              fwlab_cmd(fmt::format("sweep {} --db {} --worker {} --executor slurm --detach", file, db, fake_worker())))
              .exit_code == 0);
  fs::remove_all(dir.path() / "runs" / text(db, "SELECT id FROM jobs"));
  sync_until_done(db, 60);
  CHECK(text(db, "SELECT status FROM jobs") == "crashed");
  CHECK(text(db, "SELECT cause FROM jobs") == "job_dir_unseen");
  CHECK_THAT(text(db, "SELECT reason FROM jobs"), Catch::Contains("filesystem shared with the nodes"));
  const auto out = test::slurp((dir.path() / "runs" / ".fwlab-slurm").string() + "/" +
                               text(db, "SELECT submit_token FROM jobs") + "_0.out");
  CHECK_THAT(out, Catch::Contains("is not visible on"));
}

TEST_CASE("slurm: kill -9 of fwlab at five points, then a re-run: every job ran exactly once", "[.slurm]") {
  REQUIRE(std::getenv("SLURM_CONF"));
  for (const char* point : {"after_intent", "after_sbatch", "after_record", "before_outcome", "after_outcome"}) {
    DYNAMIC_SECTION(point) {
      test::TempDir dir(std::string("slurm-kill-") + point);
      const auto file = dir.file("t.toml"), db = dir.file("r.db");
      test::spit(file, two_stage("kill", 0));
      const auto sweep =
          fwlab_cmd(fmt::format("sweep {} --db {} --worker {} --executor slurm", file, db, fake_worker()));
      const auto killed = test::run_command(fmt::format("FWLAB_CRASH_AT={} {}", point, sweep));
      INFO(killed.output);
      CHECK((killed.exit_code == 137 || killed.exit_code == -1));  // SIGKILL (through sh: 128 + 9)
      const auto again = test::run_command(sweep);
      INFO(again.output);
      CHECK(again.exit_code == 0);
      sync_until_done(db);  // the first (killed) sweep's row is closed too
      CHECK(scalar(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 4);
      const auto runs = starts(dir.path() / "runs");
      CHECK(runs.size() == 4);
      for (const auto& [job, n] : runs) CHECK(n == 1);
      CHECK(text(db, "PRAGMA integrity_check") == "ok");
      CHECK(scalar(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'running'") == 0);
    }
  }
}

namespace {

// A small MQAR training job of the real worker, long enough (a few seconds) to be signalled while it runs.
std::string training_job(const std::string& name) {
  return fmt::format(R"([experiment]
name = "{}"
[defaults]
seed = 3
[defaults.data]
source = "mqar"
[defaults.data.mqar]
vocab = 64
seq_len = 32
[defaults.model]
vocab = 64
d_model = 32
n_layers = 2
n_heads = 2
head_dim = 16
context = 32
[defaults.train]
batch_size = 16
steps = 400
log_every = 5
[defaults.eval]
every = 400
mqar_batches = 2
[stage.run]
mixer = "fast_weight"
rule = "delta"
m = 8
[executor]
cpus = 1
)",
                     name);
}

std::vector<double> train_losses(const std::string& db) {
  Db d(db, true);
  auto q = d.prepare("SELECT value FROM metrics WHERE key = 'train_loss' ORDER BY step");
  std::vector<double> out;
  while (q.step()) out.push_back(q.real(0));
  return out;
}

}  // namespace

TEST_CASE("slurm: the pre-timeout signal checkpoints, the job requeues and resumes to the uninterrupted curve",
          "[.slurm]") {
  REQUIRE(std::getenv("SLURM_CONF"));
  test::TempDir dir("slurm-requeue");
  const auto file = dir.file("t.toml"), db = dir.file("r.db"), local_db = dir.file("local.db");
  test::spit(file, training_job("requeue"));
  const auto local = test::run_command(
      fwlab_cmd(fmt::format("sweep {} --db {} --runs {} --threads 1", file, local_db, dir.file("local-runs"))));
  REQUIRE(local.exit_code == 0);
  REQUIRE(test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --executor slurm --detach", file, db))).exit_code ==
          0);
  const auto id = text(db, "SELECT id FROM jobs"), batch_id = text(db, "SELECT batch_id FROM jobs");
  const auto events = dir.path() / "runs" / id / "events.jsonl";
  for (int i = 0; i < 600 && test::slurp(events.string()).find("\"step\":20,") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // What Slurm sends --signal=B:USR1@N seconds before the time limit, now.
  REQUIRE(test::run_command(fmt::format("scancel --signal=USR1 --batch {}", batch_id)).exit_code == 0);
  sync_until_done(db, 180);
  CHECK(text(db, "SELECT status FROM jobs") == "finished");
  CHECK(scalar(db, "SELECT retries_used FROM jobs") == 0);  // Slurm requeued it; fwlab did not resubmit
  CHECK(scalar(db, "SELECT COUNT(*) FROM events WHERE type = 'start'") == 2);
  CHECK(scalar(db, "SELECT COUNT(*) FROM events WHERE type = 'end' AND body LIKE '%\"interrupted\"%'") == 1);
  CHECK(scalar(db,
               "SELECT json_extract(body, '$.resumed_from_step') FROM events WHERE type = 'start' ORDER BY seq DESC "
               "LIMIT 1") >= 20);
  CHECK_THAT(test::slurp((dir.path() / "runs" / id / "slurm.log").string()), Catch::Contains("requeueing job"));
  const auto curve = train_losses(db), uninterrupted = train_losses(local_db);
  REQUIRE(curve.size() == uninterrupted.size());
  CHECK(curve == uninterrupted);  // bit for bit: the final loss and every point before it
}

TEST_CASE("slurm: table1's smoke profile through Slurm gives the local pool's table", "[.slurm]") {
  REQUIRE(std::getenv("SLURM_CONF"));
  test::TempDir dir("slurm-table1");
  const auto file = std::string(FWLAB_SOURCE_DIR) + "/experiments/table1.toml";
  const auto slurm_db = dir.file("slurm.db"), local_db = dir.file("local.db");
  const auto on_slurm =
      test::run_command(fwlab_cmd(fmt::format("sweep {} --profile smoke --db {} --executor slurm", file, slurm_db)));
  INFO(on_slurm.output);
  REQUIRE(on_slurm.exit_code == 0);
  const auto local = test::run_command(
      fwlab_cmd(fmt::format("sweep {} --profile smoke --db {} --threads 1 --jobs 2", file, local_db)));
  REQUIRE(local.exit_code == 0);
  const auto slurm_table =
      test::run_command(fwlab_cmd(fmt::format("table {} --profile smoke --db {}", file, slurm_db)));
  const auto local_table =
      test::run_command(fwlab_cmd(fmt::format("table {} --profile smoke --db {}", file, local_db)));
  REQUIRE(slurm_table.exit_code == 0);
  CHECK(slurm_table.output == local_table.output);
  CHECK(scalar(slurm_db, "SELECT COUNT(*) FROM jobs WHERE launcher = 'slurm' AND status = 'finished'") ==
        scalar(local_db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'"));
}
