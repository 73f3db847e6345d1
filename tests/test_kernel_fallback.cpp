// The first-use kernel self-check as a user meets it (kernels/decay/kernel_guard.h): a job whose fused CPU kernel is
// made wrong (job.json debug.wrong_kernel) records a kernel_fallback event and trains on libtorch's form, following the
// right kernel's curve; with kernel_check = false the wrong kernel's results go through; `fwlab report` lists the
// job; and `fwlab doctor` passes here on the host paths and fails on the wrong kernel.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "contract/job/events.h"
#include "tests/test_support.h"

using namespace fwlab;
using nlohmann::json;

namespace {

json gated_job() {
  return json::parse(R"({
    "seed": 3, "threads": 1,
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "head_dim": 16, "context": 32, "dropout": 0.0,
              "mixer": {"kind": "fast_weight", "rule": "gated", "feature_map": "elu1", "norm": "none", "m": 16}},
    "optim": {"lr": 3e-3, "warmup_steps": 2},
    "train": {"steps": 12, "batch_size": 4, "seq_len": 32, "log_every": 2},
    "eval": {"every": 0, "max_tokens": 512, "test": false}
  })");
}

struct Ran {
  std::vector<double> losses;
  std::vector<json> fallbacks;
};

Ran run_job(const json& spec) {
  test::TempDir dir("kernel-job");
  test::spit(dir.file("job.json"), spec.dump(2));
  const auto r = test::run_command(fmt::format("{} run {}", FWLAB_WORKER, dir.path().string()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  Ran out;
  for (auto& e : read_events(dir.file("events.jsonl")).events) {
    if (e["type"] == "metric" && e["key"] == "train_loss") out.losses.push_back(e["value"].get<double>());
    if (e["type"] == "kernel_fallback") out.fallbacks.push_back(e);
  }
  return out;
}

double largest_gap(const std::vector<double>& a, const std::vector<double>& b) {
  double gap = 0;
  for (size_t i = 0; i < a.size(); ++i) gap = std::max(gap, std::fabs(a[i] - b[i]) / b[i]);
  return gap;
}

}  // namespace

TEST_CASE("kernel self-check: a job with a wrong kernel records the fallback and follows the right kernel's curve",
          "[worker]") {
  const auto right = run_job(gated_job());
  auto spec = gated_job();
  spec["debug"]["wrong_kernel"] = "decay_fused_cpu";
  const auto caught = run_job(spec);
  spec["kernel_check"] = false;  // the check is what caught it
  const auto unchecked = run_job(spec);
  CHECK(right.fallbacks.empty());
  CHECK(unchecked.fallbacks.empty());
  REQUIRE(caught.fallbacks.size() >= 1);
  CHECK(caught.fallbacks[0]["kernel"] == "decay_fused_cpu");
  CHECK_THAT(caught.fallbacks[0]["shape_class"].get<std::string>(), Catch::StartsWith("cpu Float D="));
  CHECK(caught.fallbacks[0]["max_error"].get<double>() > 0.05);
  REQUIRE(caught.losses.size() == right.losses.size());
  REQUIRE(unchecked.losses.size() == right.losses.size());
  const double caught_gap = largest_gap(caught.losses, right.losses),
               unchecked_gap = largest_gap(unchecked.losses, right.losses);
  INFO("largest relative loss gap to the right kernel's run: with the check " << caught_gap << ", without "
                                                                              << unchecked_gap);
  CHECK(caught_gap < 1e-5);  // libtorch's form: the same numbers up to rounding
  CHECK(unchecked_gap > 100 * caught_gap);
}

TEST_CASE("kernel self-check: bad settings are refused naming the key", "[worker]") {
  for (const auto& [key, value, message] :
       {std::tuple{"kernel_check", json("yes"), "kernel_check: must be"},
        std::tuple{"debug", json{{"wrong_kernel", "decay"}}, "debug.wrong_kernel: 'decay' is not one of"}}) {
    test::TempDir dir("kernel-job");
    auto spec = gated_job();
    spec[key] = value;
    test::spit(dir.file("job.json"), spec.dump(2));
    const auto r = test::run_command(fmt::format("{} validate {}", FWLAB_WORKER, dir.path().string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
  }
}

TEST_CASE("fwlab report lists the jobs whose kernels fell back", "[worker]") {
  test::TempDir dir("kernel-sweep");
  test::spit(dir.file("kf.toml"), R"([experiment]
name = "kernel_fallback"

[defaults]
steps = 4
seed = 1
threads = 1
d_model = 32
n_layers = 1
context = 32
batch_size = 2
seq_len = 32
eval.every = 0
eval.max_tokens = 256

[stage.train]
mixer = "fast_weight"
rule = "gated"
m = 4

[grid]
"debug.wrong_kernel" = ["decay_fused_cpu", ""]  # one job with the wrong kernel, one without
)");
  const auto db = dir.file("fwlab.db"), file = dir.file("kf.toml");
  const auto sweep =
      test::run_command(fmt::format("{} sweep {} --db {} --worker {}", FWLAB_BIN, file, db, FWLAB_WORKER));
  INFO(sweep.output);
  REQUIRE(sweep.exit_code == 0);
  const auto report = test::run_command(fmt::format("{} report {} --db {}", FWLAB_BIN, file, db));
  REQUIRE(report.exit_code == 0);
  INFO(report.output);
  const auto section = report.output.find("## Kernel fallbacks");
  REQUIRE(section != std::string::npos);
  const auto table = report.output.substr(section);
  CHECK_THAT(table, Catch::Contains("| debug.wrong_kernel=decay_fused_cpu | train |"));
  CHECK_THAT(table, Catch::Contains("| decay_fused_cpu | cpu Float D=32 M=4 gates=head | 0.1 in "));
  CHECK(table.find("| train |") == table.rfind("| train |"));  // one row: the right kernel's job is not listed
}

TEST_CASE("fwlab doctor: without a GPU it says so, checks the host paths and passes; a wrong kernel fails it",
          "[worker]") {
  const auto ok = test::run_command(fmt::format("{} doctor --quick --threads 2", FWLAB_BIN));
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.output, Catch::Contains("no CUDA device usable"));
  CHECK_THAT(ok.output, Catch::Contains("libtorch"));
  CHECK_THAT(ok.output, Catch::Contains("22 passed, 0 failed"));
  for (const char* row :
       {"chunked (host run)   fp32    64   64    72 strong", "chunked (host run)   bf16   128  128    72 none",
        "chunked (host run)   fp16    64   64    72 strong", "fused (CPU)          fp32   128  128    72 strong",
        "delta (host run)     fp32    64   64    72 alpha", "delta (host run)     bf16    64   64    72 none",
        "delta (host run)     fp16    64   64    72 alpha"})
    CHECK_THAT(ok.output, Catch::Contains(row));
  const auto bad =
      test::run_command(fmt::format("{} doctor --quick --threads 2 --wrong-kernel decay_fused_cpu", FWLAB_BIN));
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.output, Catch::Contains("18 passed, 4 failed"));
  CHECK_THAT(bad.output, Catch::Contains("FAIL"));
  const auto bad_delta =
      test::run_command(fmt::format("{} doctor --quick --threads 2 --wrong-kernel delta_chunks_cuda", FWLAB_BIN));
  CHECK(bad_delta.exit_code == 1);
  CHECK_THAT(bad_delta.output, Catch::Contains("16 passed, 6 failed"));
  CHECK_THAT(bad_delta.output, Catch::Contains("delta (host run)     fp32    64   64    72 alpha"));
}
