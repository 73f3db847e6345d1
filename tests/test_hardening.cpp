// A shared experiment file or database is data, never a program; a bad path or size gets a clear error and
// exit 2 with nothing written; every final outcome happens once; a damaged checkpoint is not a result; bad
// inputs are found before a sweep starts. Each case here failed before the hardening it tests.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "contract/files/remove_tree.h"
#include "harness/db.h"
#include "tests/test_support.h"

using namespace fwlab;
using fwlab::test::fake_worker;
using fwlab::test::fwlab_cmd;
namespace fs = std::filesystem;

namespace {

int64_t count(const std::string& db_path, const std::string& sql) {
  Db db(db_path, true);
  auto q = db.prepare(sql);
  q.step();
  return q.integer(0);
}

// Strings that would run `touch MARKER` in gnuplot, a shell or LaTeX if they ever reached one as code.
struct Hostile {
  std::string dir;
  std::string backtick() const { return fmt::format("`touch {}/m1`", dir); }
  std::string system_call() const { return fmt::format("system(\\\"touch {}/m2\\\")", dir); }  // TOML-escaped quotes
  std::string newline() const { return fmt::format("x\\n!touch {}/m3\\nset output '{}/m4'", dir, dir); }
  std::string quotes() const { return fmt::format("it's \\\"q\\\" ' \\\\ \\\\write18{{touch {}/m5}}", dir); }
  bool anything_ran() const {
    for (const char* m : {"m1", "m2", "m3", "m4", "m5"})
      if (fs::exists(fs::path(dir) / m)) return true;
    return false;
  }
};

// One stage over preset names and labels that carry the hostile strings; the fake worker runs it.
std::string hostile_experiment(const Hostile& h) {
  return fmt::format(R"([experiment]
name = "hostile"
description = "{0} {1}"
[defaults]
steps = 3
[stage.train]
mixer = "softmax"
[grid]
variant = ["{0}", "{1}", "{2}", "{3}"]
[preset.variant."{0}"]
lr = 0.001
[preset.variant."{1}"]
lr = 0.002
[preset.variant."{2}"]
lr = 0.003
[preset.variant."{3}"]
lr = 0.004
[table]
rows = ["variant"]
metric = "valid_loss"
caption = "{2}"
labels = {{ "{3}" = "=cmd() {3}" }}
)",
                     h.backtick(), h.system_call(), h.newline(), h.quotes());
}

}  // namespace

TEST_CASE("hardening: strings from an experiment file reach gnuplot, LaTeX and CSV as inert text", "[hardening]") {
  test::TempDir dir("hostile");
  const Hostile h{dir.path().string()};
  const auto file = dir.file("hostile.toml"), db = dir.file("fwlab.db");
  test::spit(file, hostile_experiment(h));
  const auto sweep = test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, db, fake_worker())));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);

  const auto plots = dir.file("plots");
  const auto plot = test::run_command(fwlab_cmd(fmt::format("plot {} --db {} --out {}", file, db, plots)));
  INFO(plot.output);
  CHECK_FALSE(h.anything_ran());
  REQUIRE(plot.exit_code == 0);
  const auto gp = test::slurp(plots + "/curves.gp");
  CHECK(fs::file_size(plots + "/curves.png") > 200);
  // The strings are there, as text: single-quoted, on one line, quotes doubled.
  CHECK_THAT(gp, Catch::Contains(fmt::format("`touch {}/m1`", h.dir)));
  CHECK_THAT(gp, Catch::Contains("it''s"));
  CHECK_THAT(gp, !Catch::Contains("\"`touch"));
  for (size_t at = gp.find("!touch"); at != std::string::npos; at = gp.find("!touch", at + 1))
    CHECK(gp[at - 1] != '\n');  // never at the start of a line, where gnuplot would run it
  CHECK_FALSE(h.anything_ran());

  const auto tex = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --format tex", file, db)));
  INFO(tex.output);
  REQUIRE(tex.exit_code == 0);
  CHECK_THAT(tex.output, Catch::Contains("\\textbackslash{}write18\\{touch"));
  CHECK_THAT(tex.output, !Catch::Contains("\\write18"));
  CHECK_THAT(tex.output, !Catch::Contains("\n!touch"));  // a newline in a cell would end the row

  const auto csv = test::run_command(fwlab_cmd(fmt::format("table {} --db {} --format csv", file, db)));
  REQUIRE(csv.exit_code == 0);
  INFO(csv.output);
  CHECK_THAT(csv.output, Catch::Contains("'=cmd()"));
  CHECK_THAT(csv.output, !Catch::Contains(",=cmd()") && !Catch::Contains("\n=cmd()") &&
                             !Catch::Contains("\"=cmd()"));  // no cell starts a formula
  CHECK_FALSE(h.anything_ran());
}

TEST_CASE("hardening: an experiment name cannot leave the results folder", "[hardening]") {
  test::TempDir dir("names");
  for (const std::string name : {"..", ".", "../escape", "/tmp/abs", ".hidden", "a\\\\b", "a b"}) {
    const auto file = dir.file("n.toml");
    test::spit(file, fmt::format("[experiment]\nname = \"{}\"\n[stage.s]\nmixer = \"softmax\"\n", name));
    const auto r = test::run_command(
        fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, dir.file("x.db"), fake_worker())));
    INFO(name << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("n.toml:2:8: experiment.name: must be a plain name"));
    CHECK_FALSE(fs::exists(dir.file("x.db")));
  }
}

TEST_CASE("hardening: query runs only statements that read, all of them or none", "[hardening]") {
  test::TempDir dir("query");
  const auto file = dir.file("q.toml"), db = dir.file("fwlab.db");
  test::spit(
      file,
      "[experiment]\nname = \"q\"\n[defaults]\nsteps = 2\n[stage.s]\nmixer = \"softmax\"\n[grid]\nlr = [0.1, 0.2]\n");
  REQUIRE(
      test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, db, fake_worker()))).exit_code ==
      0);
  const auto query = [&](const std::string& sql) {
    return test::run_command(fwlab_cmd(fmt::format("query --db {} \"{}\"", db, sql)));
  };

  const auto copy = dir.file("copy.db");
  for (const std::string& sql : std::vector<std::string>{
           fmt::format("VACUUM INTO '{}'", copy), fmt::format("SELECT 1; VACUUM INTO '{}'", copy),
           "SELECT COUNT(*) FROM jobs; DELETE FROM jobs", fmt::format("ATTACH DATABASE '{}' AS x", copy),
           "PRAGMA user_version = 7", "UPDATE jobs SET status = 'x'"}) {
    const auto r = query(sql);
    INFO(sql << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("queries may only read"));
    CHECK_THAT(r.output, !Catch::Contains("COUNT(*)\n"));  // the reading statement before it did not run either
  }
  CHECK_FALSE(fs::exists(copy));
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'finished'") == 2);
  CHECK(count(db, "PRAGMA user_version") == 0);

  const auto both = query("SELECT COUNT(*) AS n FROM jobs; SELECT 40 + 2 AS answer");
  INFO(both.output);
  CHECK(both.exit_code == 0);
  CHECK_THAT(both.output, Catch::Contains("n\n-\n2\n") && Catch::Contains("answer\n------\n42"));
  CHECK(query("PRAGMA table_info(jobs)").exit_code == 0);
  const auto help = test::run_command(fwlab_cmd("query --help"));
  CHECK_THAT(help.output, Catch::Contains("only read") && Catch::Contains("VACUUM INTO"));
}

TEST_CASE("hardening: bad --worker, --db and --runs give exit 2 naming the argument, and write nothing",
          "[hardening]") {
  test::TempDir dir("paths");
  const auto file = dir.file("p.toml");
  test::spit(file, "[experiment]\nname = \"p\"\n[defaults]\nsteps = 2\n[stage.s]\nmixer = \"softmax\"\n");
  const auto not_sqlite = dir.file("notes.txt");
  test::spit(not_sqlite, "my notes, not a database\n");
  const auto not_executable = dir.file("worker.txt");
  test::spit(not_executable, "#!/bin/sh\n");
  fs::create_directories(dir.file("a_dir"));
  const auto db = dir.file("fwlab.db");
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {fmt::format("--db {} --worker {}/missing-worker", db, dir.path().string()),
       "--worker " + dir.path().string() + "/missing-worker: no such file"},
      {fmt::format("--db {} --worker {}", db, not_executable),
       "--worker " + not_executable + ": not an executable file"},
      {fmt::format("--db {} --worker no-such-fwlab-worker", db), "--worker no-such-fwlab-worker: not found on PATH"},
      {fmt::format("--db {} --worker {}", dir.file("a_dir"), fake_worker()),
       "--db " + dir.file("a_dir") + ": is a directory"},
      {fmt::format("--db {} --worker {}", not_sqlite, fake_worker()),
       "--db " + not_sqlite + ": not an SQLite database"},
      {fmt::format("--db /proc/fwlab-no/fwlab.db --worker {}", fake_worker()),
       "--db /proc/fwlab-no/fwlab.db: cannot create its folder"},
      {fmt::format("--db {} --runs {} --worker {}", db, not_sqlite, fake_worker()), "--runs " + not_sqlite + ": "},
      {fmt::format("--db {} --runs /proc/fwlab-runs --worker {}", db, fake_worker()),
       "--runs /proc/fwlab-runs: cannot create the folder"},
  };
  for (const auto& c : cases) {
    const auto r = test::run_command(fwlab_cmd(fmt::format("sweep {} {}", file, c.args)));
    INFO(c.args << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::StartsWith("fwlab: " + c.expected));
    CHECK_THAT(r.output, !Catch::Contains("terminate called"));
    CHECK_FALSE(fs::exists(db));
  }
  CHECK(test::slurp(not_sqlite) == "my notes, not a database\n");
  for (const std::string& cmd : std::vector<std::string>{
           "query --db " + not_sqlite + " 'SELECT 1'", "status --db " + not_sqlite,
           "table " + file + " --db " + not_sqlite, "query --db " + dir.file("a_dir") + " 'SELECT 1'"}) {
    const auto r = test::run_command(fwlab_cmd(cmd));
    INFO(cmd << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::StartsWith("fwlab: --db "));
  }
  CHECK(test::slurp(not_sqlite) == "my notes, not a database\n");
}

TEST_CASE("hardening: a results database on read-only media can be read", "[hardening]") {
  test::TempDir dir("readonly");
  const auto file = dir.file("r.toml"), db = dir.file("fwlab.db");
  test::spit(
      file,
      "[experiment]\nname = \"r\"\n[defaults]\nsteps = 2\n[stage.s]\nmixer = \"softmax\"\n[grid]\nlr = [0.1, 0.2]\n"
      "[table]\nrows = [\"lr\"]\nmetric = \"valid_loss\"\n");
  REQUIRE(
      test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, db, fake_worker()))).exit_code ==
      0);
  // A folder nobody may write to; root writes anywhere, so as root the commands run as the unprivileged user.
  const auto media = dir.path() / "media";
  fs::create_directories(media);
  fs::copy_file(db, media / "fwlab.db");
  fs::copy_file(file, media / "r.toml");
  ::chmod(dir.path().c_str(), 0755);
  ::chmod((media / "fwlab.db").c_str(), 0444);
  ::chmod((media / "r.toml").c_str(), 0444);
  ::chmod(media.c_str(), 0555);
  std::string as_reader;
  std::string fwlab = FWLAB_BIN;
  if (::geteuid() == 0) {
    as_reader = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    if (test::run_command(as_reader + "test -x " + fwlab).exit_code != 0) {  // a build folder the user cannot reach
      fs::copy_file(fwlab, dir.path() / "fwlab");
      fwlab = (dir.path() / "fwlab").string();
    }
  }
  const auto q = test::run_command(fmt::format("{}{} query --db {} 'SELECT COUNT(*) AS n FROM jobs'", as_reader, fwlab,
                                               (media / "fwlab.db").string()));
  INFO(q.output);
  CHECK(q.exit_code == 0);
  CHECK_THAT(q.output, Catch::Contains("n\n-\n2"));
  const auto t = test::run_command(fmt::format("{}{} table {} --db {}", as_reader, fwlab, (media / "r.toml").string(),
                                               (media / "fwlab.db").string()));
  INFO(t.output);
  CHECK(t.exit_code == 0);
  CHECK_THAT(t.output, Catch::Contains("| 0.1 |"));
  CHECK_FALSE(fs::exists(media / "fwlab.db-shm"));
  ::chmod(media.c_str(), 0755);
}

TEST_CASE("hardening: a FIFO as experiment file and absurd sizes are refused at once", "[hardening]") {
  test::TempDir dir("fifo");
  const auto fifo = dir.file("exp.toml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string cmd : {"sweep", "table", "report"}) {
    const auto r =
        test::run_command("timeout 20 " + fwlab_cmd(fmt::format("{} {} --db {}", cmd, fifo, dir.file("f.db"))));
    INFO(cmd << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(fifo + ":1:1: not a regular file"));
  }
  const auto file = dir.file("big.toml");
  for (const std::string setting : {"batch_size = 1000000000000", "d_model = 4611686018427387904",
                                    "seq_len = 9000000000", "m = 100000000", "n_layers = 9993995"}) {
    test::spit(
        file,
        fmt::format("[experiment]\nname = \"big\"\n[defaults]\nsteps = 2\n{}\n[stage.s]\nmixer = \"fast_weight\"\n",
                    setting));
    const auto r = test::run_command(
        fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, dir.file("b.db"), fake_worker())));
    INFO(setting << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("big.toml:5:") && Catch::Contains("beyond what fwlab supports"));
    CHECK_FALSE(fs::exists(dir.file("b.db")));
  }
}

TEST_CASE("hardening: a worker never runs a job whose record holds a final state", "[hardening]") {
  test::TempDir dir("final");
  const nlohmann::json spec = {
      {"kind", "train"},
      {"model", {{"vocab", 64}, {"d_model", 16}, {"n_layers", 1}, {"n_heads", 1}, {"head_dim", 16}, {"context", 16}}},
      {"data", {{"source", "mqar"}, {"mqar", {{"vocab", 64}, {"seq_len", 16}, {"pairs", 2}}}}},
      {"train", {{"steps", 2}, {"batch_size", 2}, {"seq_len", 16}}}};
  for (const auto& [status, code] :
       std::vector<std::pair<std::string, int>>{{"diverged", 3}, {"failed", 2}, {"finished", 0}}) {
    const auto job = dir.path() / status;
    fs::create_directories(job);
    test::spit((job / "job.json").string(), spec.dump());
    test::spit((job / "status.json").string(), nlohmann::json{{"status", status}, {"exit_code", code}}.dump());
    const auto r = test::run_command(fmt::format("{} run {}", FWLAB_WORKER, job.string()));
    INFO(status << ": " << r.output);
    CHECK(r.exit_code == code);
    CHECK_THAT(r.output, Catch::Contains("already ended (" + status + ")"));
    CHECK_FALSE(fs::exists(job / "events.jsonl"));
  }
}

TEST_CASE("hardening: a worker whose orchestrator dies before it starts does not run unwatched", "[hardening]") {
  test::TempDir dir("orphan");
  const auto file = dir.file("o.toml"), db = dir.file("fwlab.db"), runs = dir.file("runs");
  // Seed 6: the fake worker takes 1 s to start, as libtorch does, before it could watch its parent itself.
  test::spit(file, "[experiment]\nname = \"o\"\n[defaults]\nsteps = 20\nseed = 6\n[stage.s]\nmixer = \"softmax\"\n");
  const auto pid_file = dir.file("pid");
  test::run_command(fmt::format(
      "sh -c '{} >/dev/null 2>&1 & echo $! > {}'",
      fwlab_cmd(fmt::format("sweep {} --db {} --runs {} --worker {}", file, db, runs, fake_worker())), pid_file));
  // Kill -9 the orchestrator as soon as it has started the worker.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  fs::path job_dir;
  while (job_dir.empty() && std::chrono::steady_clock::now() < deadline) {
    if (fs::is_directory(runs))
      for (const auto& e : fs::directory_iterator(runs))
        if (fs::exists(e.path() / "job.json")) job_dir = e.path();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE_FALSE(job_dir.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the worker process exists by now
  test::run_command(fmt::format("kill -9 $(cat {})", pid_file));
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // an unwatched worker would have finished by now
  const auto events = fs::exists(job_dir / "events.jsonl") ? test::slurp((job_dir / "events.jsonl").string()) : "";
  INFO(events);
  CHECK_THAT(events, !Catch::Contains("\"end\""));

  // The sweep killed with -9 is found and marked interrupted by the next command that looks.
  CHECK(count(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'running'") == 1);
  const auto status = test::run_command(fwlab_cmd(fmt::format("status --db {}", db)));
  INFO(status.output);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.output, Catch::Contains("1 interrupted"));
  CHECK(count(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'interrupted'") == 1);
  CHECK(count(db, "SELECT COUNT(*) FROM sweeps WHERE status = 'running'") == 0);
}

TEST_CASE("hardening: missing or damaged inputs are found before a sweep starts, each named with its key",
          "[hardening]") {
  test::TempDir dir("inputs");
  const auto tokens = dir.path() / "tokens";
  fs::create_directories(tokens);
  test::spit((tokens / "train.bin").string(), std::string(101, '\1'));  // odd: not whole uint16 tokens
  test::spit((tokens / "valid.bin").string(), std::string(100, '\0'));  // ids 0: within the vocabulary
  test::spit((tokens / "test.bin").string(), std::string(7, '\1'));     // optional, but checked when present
  fs::create_directories(dir.path() / "empty_brown");
  const auto file = dir.file("i.toml"), db = dir.file("fwlab.db");
  test::spit(file, fmt::format(R"([experiment]
name = "inputs"
[defaults]
steps = 2
[stage.s]
mixer = "softmax"
[grid]
corpus = ["tokens", "brown", "missing"]
[preset.corpus.tokens]
data = {{ source = "tokens", path = "{0}" }}
vocab = 256
[preset.corpus.brown]
data = {{ source = "brown", path = "{1}" }}
[preset.corpus.missing]
init_checkpoint = "{2}"
)",
                               tokens.string(), (dir.path() / "empty_brown").string(), dir.file("no.safetensors")));
  const auto r = test::run_command(fwlab_cmd(fmt::format("sweep {} --db {} --worker {}", file, db, fake_worker())));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("i.toml:10:") && Catch::Contains("preset.corpus.tokens.data.path: ") &&
                           Catch::Contains("train.bin: 101 bytes is not a whole number of uint16 tokens"));
  CHECK_THAT(r.output, Catch::Contains("test.bin: 7 bytes is not a whole number") &&
                           !Catch::Contains("valid.bin"));  // 100 bytes: fine
  CHECK_THAT(r.output, Catch::Contains("i.toml:13:") && Catch::Contains("no Brown corpus files"));
  CHECK_THAT(r.output, Catch::Contains("i.toml:15:19: preset.corpus.missing.init_checkpoint: ") &&
                           Catch::Contains("no.safetensors: cannot read"));
  CHECK_THAT(r.output, Catch::Contains("nothing was run"));
  CHECK_FALSE(fs::exists(db));
}

TEST_CASE("hardening: a checkpoint header whose shape overflows a byte count is refused naming the tensor",
          "[hardening]") {
  test::TempDir dir("overflow");
  // [2^32, 2^32] float32: 2^66 bytes; the product wraps to 0, which matched the empty data offsets before.
  const std::string header =
      R"({"__metadata__":{"fwlab.model_config":"{}"},"wte.weight":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
  std::string file(8, '\0');
  for (size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  test::spit(dir.file("huge.safetensors"), file + header);
  test::spit(dir.file("job.json"),
             nlohmann::json{{"init_checkpoint", dir.file("huge.safetensors")}, {"data", {{"source", "mqar"}}}}.dump());
  const auto r = test::run_command(fmt::format("{} validate {}", FWLAB_WORKER, dir.path().string()));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains("init_checkpoint: ") &&
                 Catch::Contains("tensor 'wte.weight': shape [4294967296,4294967296] has a byte count that overflows"));
}

TEST_CASE("hardening: remove_tree removes a tree and never follows a link out of it", "[hardening]") {
  test::TempDir dir("remove-tree");
  const auto tree = dir.path() / "tree", outside = dir.path() / "outside";
  fs::create_directories(tree / "a" / "b" / "c");
  fs::create_directories(outside / "keep");
  test::spit((tree / "a" / "b" / "c" / "x.txt").string(), "x");
  test::spit((tree / "top.txt").string(), "t");
  test::spit((outside / "keep" / "y.txt").string(), "y");
  fs::create_directory_symlink(outside, tree / "a" / "link");
  REQUIRE(remove_tree(tree.string()));
  CHECK_FALSE(fs::exists(fs::symlink_status(tree)));
  CHECK(fs::exists(outside / "keep" / "y.txt"));  // the link went, not what it pointed to
  CHECK(remove_tree((dir.path() / "never-was").string()));
  test::spit((dir.path() / "file").string(), "f");
  CHECK(remove_tree((dir.path() / "file").string()));
  CHECK_FALSE(fs::exists(dir.path() / "file"));
  fs::create_directory_symlink(outside, dir.path() / "top-link");  // a link as the path itself: the link alone
  CHECK(remove_tree((dir.path() / "top-link").string()));
  CHECK(fs::exists(outside / "keep" / "y.txt"));
}
