// fwlab-worker end to end, as the orchestrator runs it: a process per job, judged by its exit code and record.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "tests/test_support.h"
#include "contract/job/events.h"
#include "contract/formats/safetensors_header.h"
#include "worker/loss_spike.h"

using namespace fwlab;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A tiny softmax model on the Brown corpus, byte level: a few seconds per run.
json tiny_job() {
  return json::parse(R"({
    "seed": 5, "threads": 1,
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "head_dim": 16, "context": 32, "dropout": 0.1},
    "optim": {"lr": 3e-3, "warmup_steps": 3},
    "train": {"steps": 24, "batch_size": 4, "seq_len": 32, "log_every": 4, "checkpoint_every": 8},
    "eval": {"every": 8, "max_tokens": 1024}
  })");
}

struct Job {
  test::TempDir dir{"job"};
  std::string path() const { return dir.path().string(); }
  void write(const json& spec) const { test::spit(dir.file("job.json"), spec.dump(2)); }
  test::CommandResult run(const char* verb = "run") const {
    return test::run_command(fmt::format("{} {} {}", FWLAB_WORKER, verb, path()));
  }
  std::vector<json> events() const { return read_events(dir.file("events.jsonl")).events; }
  std::vector<json> of_type(const std::string& type) const {
    std::vector<json> out;
    for (auto& e : events())
      if (e["type"] == type) out.push_back(e);
    return out;
  }
  json status() const { return json::parse(test::slurp(dir.file("status.json"))); }
  // The record minus what legitimately differs between runs (times, pid).
  std::vector<std::string> curve() const {
    std::vector<std::string> out;
    for (auto e : events())
      if (e["type"] == "eval" || (e["type"] == "metric" && (e["key"] == "train_loss" || e["key"] == "grad_norm")))
        out.push_back(fmt::format("{} {} {}", e["step"].dump(), e.value("key", e.value("split", "")),
                                  e.contains("value") ? e["value"].dump() : e["loss"].dump()));
    return out;
  }
};

// A short run of the tiny softmax job in `job`: the teacher of the conversion tests. Returns its best checkpoint.
std::string pretrain_teacher(const Job& job) {
  auto spec = tiny_job();
  spec["train"]["steps"] = 8;
  job.write(spec);
  REQUIRE(job.run().exit_code == 0);
  return job.dir.file("best.safetensors");
}

// The tiny job with train.KEY = VALUE: it must exit 2 with `message`. Returns the job for further checks.
std::unique_ptr<Job> run_refused(const char* key, const char* value, const std::string& message) {
  auto job = std::make_unique<Job>();
  auto spec = tiny_job();
  spec["train"][key] = value;
  job->write(spec);
  const auto r = job->run();
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(message));
  return job;
}

}  // namespace

TEST_CASE("worker: same spec and seed give the same curve, bit for bit", "[worker]") {
  Job a, b;
  a.write(tiny_job());
  b.write(tiny_job());
  const auto ran = a.run();
  REQUIRE(ran.exit_code == 0);
  REQUIRE(b.run().exit_code == 0);
  // Without a terminal (a log file, nohup, Slurm): one line per log interval, with the interval's mean loss.
  int lines = 0;
  for (const auto& e : a.of_type("metric"))
    if (e["key"] == "train_loss") {
      ++lines;
      CHECK_THAT(ran.output, Catch::Contains(fmt::format("step {}/24  loss {:.4f}  lr ", e["step"].get<int64_t>(),
                                                         e["value"].get<double>())));
    }
  CHECK(lines == 6);
  CHECK_THAT(ran.output, Catch::Contains(" tok/s  elapsed ") && Catch::Contains("  ETA 0s"));
  CHECK(a.curve().size() == 6 + 3 + 1 + 6);  // 6 train_loss, 6 grad_norm, 3 valid evals, 1 test eval
  CHECK(a.curve() == b.curve());
  CHECK(a.status()["status"] == "finished");
  CHECK(a.status()["final_train_loss"] == b.status()["final_train_loss"]);
  auto start = a.of_type("start").at(0);
  CHECK(start["params"].get<int64_t>() > 0);
  CHECK(start["spec"]["seed"] == 5);                                   // the job.json as run
  CHECK(start["state_size"]["per_token_elements"] == 2 * 2 * 2 * 16);  // softmax KV cache: layers * 2 * H * hd
  CHECK(!start["versions"]["torch"].get<std::string>().empty());
  CHECK(!a.of_type("metric").empty());
  CHECK(fs::exists(a.dir.file("best.safetensors")));
  CHECK(!fs::exists(a.dir.file("resume.safetensors")));  // a finished job is never resumed
  // Running a finished job again does nothing.
  auto again = a.run();
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("already ended (finished)"));
}

TEST_CASE("worker: debug.skip_update_at_steps applies no update after those steps, and counts them", "[worker]") {
  auto spec = tiny_job();
  spec["train"]["steps"] = 4, spec["train"]["log_every"] = 1;
  Job plain, skipping, refused;
  plain.write(spec);
  spec["debug"]["skip_update_at_steps"] = {1};  // the second step: its backward runs, its update does not
  skipping.write(spec);
  spec["debug"]["skip_update_at_steps"] = {4};
  refused.write(spec);
  REQUIRE(plain.run().exit_code == 0);
  REQUIRE(skipping.run().exit_code == 0);
  const auto r = refused.run();
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains("debug.skip_update_at_steps") && Catch::Contains("below train.steps = 4, got 4"));
  const auto metric = [](const Job& job, const std::string& key) {
    std::map<int64_t, double> out;
    for (const auto& e : job.of_type("metric"))
      if (e["key"] == key) out[e["step"].get<int64_t>()] = e["value"].get<double>();
    return out;
  };
  const auto a = metric(plain, "train_loss"), b = metric(skipping, "train_loss");
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  CHECK(a.at(1) == b.at(1));  // the record counts steps from 1: its step 3 is the first after the skipped update
  CHECK(a.at(2) == b.at(2));
  CHECK(a.at(3) != b.at(3));
  CHECK(metric(skipping, "skipped_steps") == std::map<int64_t, double>{{1, 0.0}, {2, 1.0}, {3, 0.0}, {4, 0.0}});
  CHECK(metric(plain, "skipped_steps").empty());  // fp32 without the hook: nothing is ever skipped, nothing logged
}

TEST_CASE("worker: killed half-way and resumed, it ends exactly as an uninterrupted run", "[worker]") {
  Job whole, killed;
  whole.write(tiny_job());
  REQUIRE(whole.run().exit_code == 0);
  auto spec = tiny_job();
  spec["debug"] = {{"exit_at_step", 13}};  // SIGKILL after step 13; the last checkpoint is at step 8
  killed.write(spec);
  const int killed_code = killed.run().exit_code;
  CHECK((killed_code == -1 || killed_code == 128 + 9));  // SIGKILL, as seen directly or through the shell
  CHECK(killed.status()["status"] == "running");
  CHECK(fs::exists(killed.dir.file("resume.safetensors")));
  // The kill may also tear a line: simulate the worst case.
  {
    auto text = test::slurp(killed.dir.file("events.jsonl"));
    test::spit(killed.dir.file("events.jsonl"), text + R"({"type": "metric", "st)");
  }
  spec.erase("debug");
  killed.write(spec);
  auto resumed = killed.run();
  REQUIRE(resumed.exit_code == 0);
  auto starts = killed.of_type("start");
  REQUIRE(starts.size() == 2);
  CHECK(starts[1]["resumed_from_step"] == 8);
  CHECK(killed.status()["final_train_loss"] == whole.status()["final_train_loss"]);
  CHECK(killed.of_type("eval").back()["loss"] == whole.of_type("eval").back()["loss"]);
  CHECK(read_events(killed.dir.file("events.jsonl")).bad_lines == 0);
}

TEST_CASE("worker: every divergence cause is classified and recorded", "[worker]") {
  struct Case {
    const char* cause;
    json patch;
    const char* layer_key;
    json layer;
  };
  const std::vector<Case> cases = {
      {"nonfinite_loss",
       {{"debug", {{"nan_param_at_step", 3}, {"nan_param", "blocks.1.fc.weight"}}}},
       "first_nonfinite_layer",
       "blocks.1"},
      {"nonfinite_grad", {{"debug", {{"nan_grad_at_step", 2}}}}, "first_nonfinite_layer", nullptr},
      {"loss_spike", {{"optim", {{"lr", 10.0}}}}, "first_nonfinite_layer", nullptr},
      {"state_overflow",
       {{"model",
         {{"mixer", {{"kind", "fast_weight"}, {"rule", "add"}, {"feature_map", "relu"}, {"norm", "none"}, {"m", 4}}}}},
        {"divergence", {{"max_state", 1e-3}}}},
       "state_layer",
       "blocks.0"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.cause) {
      Job job;
      auto spec = tiny_job();
      spec.merge_patch(c.patch);
      job.write(spec);
      auto r = job.run();
      INFO(r.output);
      CHECK(r.exit_code == 3);
      auto div = job.of_type("divergence");
      REQUIRE(div.size() == 1);
      CHECK(div[0]["cause"] == c.cause);
      CHECK(div[0][c.layer_key] == c.layer);
      CHECK(div[0].contains("last_finite_loss"));
      CHECK(div[0].contains("value"));
      CHECK(div[0]["lr"].is_number());
      CHECK(job.status()["status"] == "diverged");
      CHECK(job.status()["cause"] == c.cause);
      CHECK(job.of_type("end").at(0)["status"] == "diverged");
    }
  }
}

TEST_CASE("worker: a threaded run is bit-reproducible on one machine: every loss of a second run is the same double",
          "[worker]") {
  // Two threads: libtorch's intra-op parallelism and the fused kernels split work across them; the numbers must
  // not depend on how the threads were scheduled. Dropout, data order and initialisation come from the seed.
  auto spec = tiny_job();
  spec["threads"] = 2;
  spec["model"]["mixer"] = {
      {"kind", "fast_weight"}, {"rule", "delta"}, {"feature_map", "relu"}, {"norm", "attn"}, {"m", 8}};
  const std::set<std::string> measured = {"tokens_per_s", "step_ms", "peak_rss_bytes"};  // timings, not results
  const auto numbers = [&](const Job& job) {
    std::vector<std::string> out;  // the record's own text of each value: equal text is an equal double
    for (const auto& e : job.events())
      if (e["type"] == "metric" && !measured.count(e["key"].get<std::string>()))
        out.push_back(fmt::format("{} {} {}", e["key"].get<std::string>(), e["step"].dump(), e["value"].dump()));
      else if (e["type"] == "eval")
        out.push_back(fmt::format("{} {} {}", e["split"].get<std::string>(), e["step"].dump(), e["loss"].dump()));
    return out;
  };
  // The delta rule's form is decided by measurement at the first run and kept for the second (form_store.h): here
  // in a file of the test's own.
  test::TempDir cache("kernel-cache");
  ::setenv("FWLAB_KERNEL_CACHE", cache.file("kernel_choices.json").c_str(), 1);
  Job a, b;
  a.write(spec);
  b.write(spec);
  REQUIRE(a.run().exit_code == 0);
  REQUIRE(b.run().exit_code == 0);
  ::unsetenv("FWLAB_KERNEL_CACHE");
  const auto first = numbers(a), second = numbers(b);
  CHECK(first.size() >= 12);  // train losses every 4 steps, three validations and the test
  // Which form of the delta rule each shape class ran, and the times that decided it (kernel_choice events).
  const auto choices = a.of_type("kernel_choice"), kept = b.of_type("kernel_choice");
  REQUIRE(!choices.empty());
  CHECK(choices[0]["family"] == "delta");
  CHECK(choices[0]["ms"].size() == 4);  // fused, chunk 16, 32, 64
  CHECK_THAT(choices[0]["shape_class"].get<std::string>(), Catch::StartsWith("cpu Float delta D="));
  REQUIRE(kept.size() == choices.size());  // the second run heard the same decisions, with no race
  CHECK(kept[0]["chosen"] == choices[0]["chosen"]);
  CHECK(kept[0]["ms"].empty());
  CHECK(first == second);
  // A different seed gives different numbers: the comparison above can fail.
  Job c;
  spec["seed"] = 6;
  c.write(spec);
  REQUIRE(c.run().exit_code == 0);
  CHECK(numbers(c) != first);
}

TEST_CASE(
    "worker: a run that diverges after validating scores its best checkpoint on test; one that diverges before does "
    "not",
    "[worker]") {
  for (const int at : {3, 12}) {  // validation at steps 8, 16, 24: before any, and after the first
    DYNAMIC_SECTION("NaN at step " << at) {
      Job job;
      auto spec = tiny_job();
      spec["debug"] = {{"nan_param_at_step", at}, {"nan_param", "blocks.1.fc.weight"}};
      job.write(spec);
      auto r = job.run();
      INFO(r.output);
      CHECK(r.exit_code == 3);
      std::vector<json> tests;
      for (const auto& e : job.of_type("eval"))
        if (e["split"] == "test") tests.push_back(e);
      CHECK(job.status()["status"] == "diverged");
      if (at == 3) {
        CHECK(tests.empty());
        CHECK(job.of_type("end").at(0)["after_best"].is_null());
        continue;
      }
      REQUIRE(tests.size() == 1);
      CHECK(tests[0]["checkpoint"] == "best");
      CHECK(tests[0]["step"] == 8);
      CHECK(std::isfinite(tests[0]["loss"].get<double>()));
      CHECK(job.of_type("end").at(0)["after_best"] == 8);
      // The test evaluation comes after the divergence is recorded, before the end.
      const auto events = job.events();
      const auto index = [&](const char* type) {
        return std::find_if(events.begin(), events.end(),
                            [&](const json& e) {
                              return e["type"] == type && (std::string(type) != "eval" || e["split"] == "test");
                            }) -
               events.begin();
      };
      CHECK(index("divergence") < index("eval"));
      CHECK(index("eval") < index("end"));
    }
  }
}

TEST_CASE("worker: bad specs exit 2 naming the key, and run nothing", "[worker]") {
  Job job;
  auto spec = tiny_job();
  spec["optim"]["lr"] = "fast";
  job.write(spec);
  auto v = job.run("validate");
  CHECK(v.exit_code == 2);
  CHECK_THAT(v.output, Catch::Contains("job.json: optim.lr: must be a number, got \"fast\""));
  auto r = job.run();
  CHECK(r.exit_code == 2);
  CHECK(!fs::exists(job.dir.file("events.jsonl")));
  spec["optim"]["lr"] = 1e-3;
  spec["init_checkpoint"] = job.dir.file("missing.safetensors");
  job.write(spec);
  CHECK_THAT(job.run("validate").output,
             Catch::Contains("init_checkpoint: " + job.dir.file("missing.safetensors") + ": cannot read"));
  spec.erase("init_checkpoint");
  job.write(spec);
  CHECK(job.run("validate").exit_code == 0);
  CHECK(test::run_command(fmt::format("{} --help", FWLAB_WORKER)).output.find("3  diverged") != std::string::npos);
}

TEST_CASE("worker: swap-then-finetune from another job's checkpoint records the conversion", "[worker]") {
  Job pretrain, finetune;
  pretrain.write(tiny_job());
  REQUIRE(pretrain.run().exit_code == 0);
  auto spec = tiny_job();
  spec.erase("model");
  spec["init_checkpoint"] = pretrain.dir.file("best.safetensors");
  spec["model"] = {
      {"mixer", {{"kind", "fast_weight"}, {"rule", "decay"}, {"feature_map", "identity"}, {"norm", "none"}, {"m", 4}}}};
  spec["train"]["steps"] = 8;
  finetune.write(spec);
  auto r = finetune.run();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto conv = finetune.of_type("conversion").at(0);
  CHECK(conv["copied"].size() > 10);
  CHECK(std::find(conv["created"].begin(), conv["created"].end(), "blocks.0.mixer.decay_z.bias") !=
        conv["created"].end());
  CHECK(conv["rescaled"].size() == 4);
  auto start = finetune.of_type("start").at(0);
  CHECK(start["model"]["layers"][1]["rule"] == "decay");
  CHECK(start["state_size"]["per_token_elements"] == 0);
  CHECK(finetune.of_type("eval").size() == 2);  // valid at step 8, test of the best checkpoint
}

TEST_CASE("worker: generation benchmark records time and memory per token by length", "[worker]") {
  for (const char* mixer : {"softmax", "decay"}) {
    DYNAMIC_SECTION(mixer) {
      Job job;
      json spec = {{"kind", "generation-bench"},
                   {"seed", 1},
                   {"threads", 1},
                   {"model", {{"d_model", 32}, {"n_layers", 2}, {"n_heads", 2}, {"head_dim", 16}, {"context", 80}}},
                   {"bench", {{"seq_lens", {16, 64}}, {"repeats", 3}, {"tokens", 4}}}};
      if (std::string(mixer) == "decay")
        spec["model"]["mixer"] = {
            {"kind", "fast_weight"}, {"rule", "decay"}, {"feature_map", "identity"}, {"norm", "none"}, {"m", 4}};
      job.write(spec);
      auto r = job.run();
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      std::map<std::string, std::map<int, double>> m;
      for (auto& e : job.of_type("metric")) m[e["key"]][e["step"].get<int>()] = e["value"].get<double>();
      CHECK(m["gen_ms_per_token"].size() == 2);
      CHECK(m["gen_ms_per_token"][64] > 0);
      CHECK(m["gen_ms_per_token_min"][16] <= m["gen_ms_per_token"][16]);
      CHECK(m["gen_ms_per_token_max"][16] >= m["gen_ms_per_token"][16]);
      // The state after L + 4 tokens: a growing KV cache for softmax, a fixed S for decay (float32).
      if (std::string(mixer) == "softmax") {
        CHECK(m["gen_state_bytes"][16] == 2 * 2 * 2 * 16 * 20 * 4);
        CHECK(m["gen_state_bytes"][64] == 2 * 2 * 2 * 16 * 68 * 4);
      } else {
        CHECK(m["gen_state_bytes"][16] == 2 * 2 * 16 * 4 * 4);
        CHECK(m["gen_state_bytes"][64] == m["gen_state_bytes"][16]);
      }
    }
  }
}

TEST_CASE("worker: user formats end to end (WikiText-103 raw with GPT-2 BPE, pre-tokenised, enwik8, MQAR, retrieval)",
          "[worker]") {
  test::TempDir data("formats");
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += fmt::format(" = Section {} = \n The quick brown fox jumps over the lazy dog {} times . \n", i, i);
  for (const char* split : {"train", "valid", "test"}) test::spit(data.file(fmt::format("wiki.{}.raw", split)), text);
  test::spit(data.file("enwik8"), text + text + text);
  std::string ids;
  for (int i = 0; i < 3000; ++i) ids += {static_cast<char>(i % 97), 0};
  for (const char* split : {"train.bin", "valid.bin", "test.bin"}) test::spit(data.file(split), ids);

  struct Case {
    const char* name;
    json data;
    json model_patch;
  };
  const std::vector<Case> cases = {
      {"wikitext103 + gpt2",
       {{"source", "wikitext103"}, {"path", data.path().string()}, {"tokenizer", "gpt2"}},
       {{"vocab", 50257}}},
      {"tokens", {{"source", "tokens"}, {"path", data.path().string()}}, {{"vocab", 100}}},
      {"enwik8", {{"source", "enwik8"}, {"path", data.file("enwik8")}}, json::object()},
      {"mqar", {{"source", "mqar"}, {"mqar", {{"vocab", 64}, {"seq_len", 32}, {"pairs", 4}}}}, {{"vocab", 64}}},
      {"retrieval",
       {{"source", "retrieval"}, {"retrieval", {{"keys", 8}, {"values", 8}, {"pairs", 5}, {"queries", 3}}}},
       {{"vocab", 80}}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      Job job;
      auto spec = tiny_job();
      spec["data"] = c.data;
      spec["model"].merge_patch(c.model_patch);
      spec["train"]["steps"] = 8;
      job.write(spec);
      auto r = job.run();
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      auto evals = job.of_type("eval");
      REQUIRE(evals.size() == 2);
      CHECK(evals[0]["loss"].is_number());
      if (std::string(c.name) == "mqar") {
        CHECK(evals[0]["accuracy"].get<double>() >= 0.0);
        CHECK(evals[0]["tokens"] == 8 * 4 * 4);  // 8 batches x 4 rows x 4 queries
      } else if (std::string(c.name) == "retrieval") {
        CHECK(evals[0]["accuracy"].get<double>() >= 0.0);
        CHECK(evals[0]["tokens"] == 8 * 4 * 3);  // 8 batches x 4 rows x 3 queries
        CHECK(!evals[0].contains("ppl"));
      } else if (std::string(c.name) == "enwik8") {
        CHECK(evals[0].contains("bpc"));  // byte level: bits per character
      } else {
        CHECK(!evals[0].contains("bpc"));
      }
    }
  }
}

TEST_CASE("worker: a damaged source checkpoint is refused naming the tensor, never recorded as a divergence",
          "[worker]") {
  Job pretrain;
  auto spec = tiny_job();
  spec["train"]["steps"] = 2;
  spec["eval"]["every"] = 0;
  pretrain.write(spec);
  REQUIRE(pretrain.run().exit_code == 0);
  const auto good = test::slurp(pretrain.dir.file("best.safetensors"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(good[static_cast<size_t>(i)]);
  const auto header = json::parse(good.substr(8, header_len));
  const auto& wte = header.at("wte.weight");
  const size_t wte_at = 8 + header_len + wte["data_offsets"][0].get<size_t>();

  auto nan_weights = good;  // one weight of wte set to a float32 NaN
  nan_weights.replace(wte_at, 4, std::string("\x00\x00\xc0\x7f", 4));
  auto wrong_dtype = good;  // wte declared I32: the same byte count, not the model's dtype
  const auto declared = wrong_dtype.find("\"wte.weight\":{\"dtype\":\"F32\"");
  REQUIRE(declared != std::string::npos);
  wrong_dtype.replace(declared + 23, 3, "I32");

  for (const auto& [damaged, expected] : std::vector<std::pair<std::string, std::string>>{
           {nan_weights, "tensor 'wte.weight' holds NaN or infinite values"},
           {wrong_dtype, "tensor 'wte.weight' is stored as I32 but the model holds F32"}}) {
    Job finetune;
    test::spit(finetune.dir.file("source.safetensors"), damaged);
    auto ft = tiny_job();
    ft.erase("model");
    ft["init_checkpoint"] = finetune.dir.file("source.safetensors");
    ft["model"] = {
        {"mixer",
         {{"kind", "fast_weight"}, {"rule", "decay"}, {"feature_map", "identity"}, {"norm", "none"}, {"m", 4}}}};
    finetune.write(ft);
    const auto r = finetune.run();
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(expected));
    CHECK(finetune.status()["status"] == "failed");
    CHECK(finetune.status()["cause"] == "bad_checkpoint");
    CHECK(finetune.of_type("divergence").empty());
  }
}

TEST_CASE("worker: a 4 GiB memory-mapped train.bin trains in a few hundred MB of RAM", "[worker]") {
  test::TempDir data("mmap");
  constexpr uintmax_t kTrainBytes = uintmax_t{4} << 30;  // 2^31 uint16 tokens; as int32 in memory it would take 8 GiB
  {
    std::ofstream(data.file("train.bin"), std::ios::binary).close();
    fs::resize_file(data.file("train.bin"), kTrainBytes);  // sparse: zeros, no disk space, the pages read on demand
  }
  std::string ids;
  for (int i = 0; i < 2000; ++i) ids += {static_cast<char>(i % 97), 0};
  test::spit(data.file("val.bin"), ids);  // nanoGPT's names: train.bin and val.bin, no test split
  Job job;
  auto spec = tiny_job();
  spec["data"] = {{"source", "tokens"}, {"path", data.path().string()}};
  spec["model"]["vocab"] = 100;
  spec["train"]["steps"] = 8;
  job.write(spec);
  auto r = job.run();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto start = job.of_type("start").at(0);
  CHECK(start["data"]["train_tokens"] == kTrainBytes / 2);
  CHECK(start["data"]["test_tokens"] == 0);
  double peak = 0;
  for (const auto& e : job.of_type("metric"))
    if (e["key"] == "peak_rss_bytes") peak = std::max(peak, e["value"].get<double>());
  INFO("peak RSS " << peak / (1 << 20) << " MiB");
  CHECK(peak > 0);
  CHECK(peak < 400.0 * (1 << 20));
  CHECK(job.of_type("eval").size() == 1);  // validation only: no test split to score
}

TEST_CASE("worker: GPT-2 BPE text is tokenized once and cached beside the corpus; a changed corpus is tokenized again",
          "[worker]") {
  test::TempDir data("bpecache");
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += fmt::format(" = Section {} = \n The quick brown fox jumps over the lazy dog {} times . \n", i, i);
  for (const char* split : {"train", "valid", "test"}) test::spit(data.file(fmt::format("wiki.{}.raw", split)), text);
  auto run = [&] {
    Job job;
    auto spec = tiny_job();
    spec["data"] = {{"source", "wikitext103"}, {"path", data.path().string()}, {"tokenizer", "gpt2"}};
    spec["model"]["vocab"] = 50257;
    spec["train"]["steps"] = 2;
    spec["eval"]["every"] = 0;
    job.write(spec);
    auto r = job.run();
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return std::pair{job.of_type("start").at(0)["data"], job.curve()};
  };
  const auto [first, first_curve] = run();
  CHECK(first["token_cache"]["hit"] == false);
  const fs::path cache = first["token_cache"]["path"].get<std::string>();
  CHECK(cache.parent_path() == data.path() / ".fwlab-tokens");
  CHECK(fs::file_size(cache / "train.bin") == 2 * first["train_tokens"].get<uintmax_t>());
  const auto [second, second_curve] = run();
  CHECK(second["token_cache"]["hit"] == true);
  CHECK(second["token_cache"]["path"] == first["token_cache"]["path"]);
  CHECK(second_curve == first_curve);  // the cached ids are the ids
  test::spit(data.file("wiki.train.raw"), text + " One more sentence for the changed corpus . \n");
  const auto [third, third_curve] = run();
  CHECK(third["token_cache"]["hit"] == false);
  CHECK(third["token_cache"]["path"] != first["token_cache"]["path"]);
  CHECK(third["train_tokens"].get<int64_t>() > first["train_tokens"].get<int64_t>());
}

TEST_CASE("worker: fine-tunes a Hugging Face GPT-2 directory into decay, then generates text from it (CI smoke)",
          "[worker]") {
  test::TempDir hf("hfsmoke");
  auto py = test::run_command("/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/hf_gpt2.py write " +
                              hf.path().string() + " --no-expected --vocab 256 --positions 32");
  INFO(py.output);
  REQUIRE(py.exit_code == 0);
  Job job;
  auto spec = tiny_job();
  spec["init_checkpoint"] = "hf:" + hf.path().string();
  spec["model"] = {
      {"mixer", {{"kind", "fast_weight"}, {"rule", "decay"}, {"feature_map", "identity"}, {"norm", "none"}, {"m", 4}}}};
  spec["train"]["steps"] = 8;
  job.write(spec);
  auto r = job.run();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto import = job.of_type("import").at(0);
  CHECK(import["tensors"].size() ==
        3 * (12 + 2) + 4 + 1);  // every tensor of both shards: 12 per layer, 2 mask buffers, lm_head
  const auto conversion = job.of_type("conversion").at(0);
  CHECK(conversion["copied"].size() > 0);
  CHECK(conversion["rescaled"].size() == 3 * 2);  // W_v rows of every layer (decay's UGI rescale)
  CHECK(job.of_type("start").at(0)["model"]["layers"][0]["rule"] == "decay");

  const auto generate = fmt::format("{} generate {} --prompt 'The county ' --tokens 16 --greedy --threads 1",
                                    FWLAB_WORKER, job.dir.file("best.safetensors"));
  auto a = test::run_command(generate), b = test::run_command(generate);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("11 prompt + 16 new tokens (greedy, byte)") && Catch::Contains("tokens/s") &&
                           Catch::Contains("state per sequence"));
  const auto text = [](const std::string& out) { return out.substr(0, out.find('\n')); };
  CHECK(text(a.output) == text(b.output));  // greedy is deterministic
  // The hf: directory itself, sampled; and a tokenizer its vocabulary cannot hold.
  auto sampled =
      test::run_command(fmt::format("{} generate hf:{} --prompt 'The ' --tokens 8 --tokenizer byte --seed 3 --top-k 5",
                                    FWLAB_WORKER, hf.path().string()));
  CHECK(sampled.exit_code == 0);
  CHECK_THAT(sampled.output, Catch::Contains("T = 1, top-k 5, seed 3"));
  // GPT-2's own tokenizer, the default for hf: directories (their vocab.json + merges.txt, else the repo's BPE files).
  const auto bpe = hf.path() / "bpe";
  REQUIRE(test::run_command("/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/hf_gpt2.py write " + bpe.string() +
                            " --no-expected --vocab 50257 --embd 16 --heads 2 --layers 1 --shards 1")
              .exit_code == 0);
  auto words = test::run_command(
      fmt::format("{} generate hf:{} --prompt 'Hello world' --tokens 8 --greedy", FWLAB_WORKER, bpe.string()));
  INFO(words.output);
  CHECK(words.exit_code == 0);
  CHECK_THAT(words.output, Catch::Contains("2 prompt + 8 new tokens (greedy, gpt2)"));
  auto wrong =
      test::run_command(fmt::format("{} generate hf:{} --prompt 'The ' --tokens 8", FWLAB_WORKER, hf.path().string()));
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.output, Catch::Contains("--tokenizer: the gpt2 tokenizer has 50257 tokens but the model only 256"));

  Job mismatched;
  spec["data"] = {{"tokenizer", "gpt2"}};
  mismatched.write(spec);
  auto bad = mismatched.run();
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("data.tokenizer: the gpt2 tokenizer has 50257 tokens but hf:"));
}

TEST_CASE("worker: train.precision = bf16 follows the fp32 curve; fp16 needs CUDA", "[worker]") {
  // A decay model and a softmax one, bf16 autocast on CPU (matrix products in bf16; gates, states, LayerNorm and
  // the loss in fp32) against the same job in fp32: the same batches, so the curves differ only by rounding.
  for (const char* kind : {"decay", "softmax"}) {
    DYNAMIC_SECTION(kind) {
      auto spec = tiny_job();
      spec["model"]["dropout"] = 0.0;
      if (std::string(kind) == "decay")
        spec["model"]["mixer"] = {
            {"kind", "fast_weight"}, {"rule", "decay"}, {"feature_map", "identity"}, {"norm", "none"}, {"m", 8}};
      Job fp32, bf16;
      fp32.write(spec);
      spec["train"]["precision"] = "bf16";
      bf16.write(spec);
      REQUIRE(fp32.run().exit_code == 0);
      auto r = bf16.run();
      REQUIRE(r.exit_code == 0);
      auto losses = [](const Job& j) {
        std::vector<double> out;
        for (auto& e : j.of_type("metric"))
          if (e["key"] == "train_loss") out.push_back(e["value"].get<double>());
        return out;
      };
      const auto a = losses(fp32), b = losses(bf16);
      REQUIRE(a.size() == 6);
      REQUIRE(b.size() == a.size());
      CHECK(a.front() - a.back() > 0.3);  // it learns, so the comparison means something
      for (size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(a[i] - b[i]) < 0.05 * a[i]);
      CHECK(a != b);  // bf16 really ran: its rounding shows
      CHECK(bf16.of_type("start").at(0)["spec"]["train"]["precision"] == "bf16");
    }
  }
  SECTION("fp16 on CPU: exit 2 naming the key, nothing run") {
    CHECK(!fs::exists(
        run_refused("precision", "fp16", "train.precision: fp16 needs a CUDA device")->dir.file("events.jsonl")));
    run_refused("precision", "fp8", "train.precision: 'fp8' is not one of fp32, bf16, fp16");
  }
}

TEST_CASE("worker: train.trainable freezes parameter groups, frozen tensors stay bit-identical", "[worker]") {
  Job pretrain;
  const auto source = pretrain_teacher(pretrain);
  // The raw bytes of every tensor of a checkpoint, by name (an independent reader: the file, not libtorch).
  auto tensor_bytes = [](const std::string& path) {
    const auto header = safetensors::read_header(path);
    const auto file = test::slurp(path);
    std::map<std::string, std::string> out;
    for (const auto& t : header.tensors) out[t.name] = file.substr(header.data_start + t.begin, t.end - t.begin);
    return out;
  };
  // add / relu: conversion copies qkv and o unchanged and creates only the feature map (no rescaled tensor).
  auto finetune = [&](const char* trainable, int64_t steps, int64_t lora_rank = 0) {
    auto job = std::make_unique<Job>();
    auto spec = tiny_job();
    spec.erase("model");
    spec["init_checkpoint"] = source;
    spec["model"] = {
        {"mixer", {{"kind", "fast_weight"}, {"rule", "add"}, {"feature_map", "relu"}, {"norm", "attn"}, {"m", 8}}}};
    if (lora_rank > 0) spec["model"] = {{"lora_rank", lora_rank}};  // the softmax layers kept, adapters added
    spec["train"]["steps"] = steps;
    spec["train"]["trainable"] = trainable;
    spec["eval"]["every"] = steps;
    job->write(spec);
    auto r = job->run();
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return job;
  };
  const auto before = tensor_bytes(source);
  auto is_map = [](const std::string& name) { return name.find(".mixer.phi.") != std::string::npos; };

  SECTION("new_mixers: only the feature maps train; every copied tensor keeps the source's bytes") {
    auto short_run = finetune("new_mixers", 4), long_run = finetune("new_mixers", 12);
    const auto a = tensor_bytes(short_run->dir.file("best.safetensors")),
               b = tensor_bytes(long_run->dir.file("best.safetensors"));
    int maps = 0, frozen = 0;
    for (const auto& [name, bytes] : b) {
      INFO(name);
      if (is_map(name)) {
        ++maps;
        CHECK(bytes != a.at(name));  // trained further in the longer run
      } else {
        ++frozen;
        CHECK(bytes == before.at(name));
      }
    }
    CHECK(maps == 4);  // 2 layers x (weight, bias)
    CHECK(frozen > 10);
    const auto start = long_run->of_type("start").at(0);
    CHECK(start["trainable"]["which"] == "new_mixers");
    CHECK(start["trainable"]["tensors"] == 4);
    CHECK(start["trainable"]["parameters"] == 2 * 2 * (8 * 16 + 8));  // layers x heads x (m x head_dim + m)
  }
  SECTION("no_feature_maps: the feature maps stay at their initialisation, everything else trains") {
    auto short_run = finetune("no_feature_maps", 4), long_run = finetune("no_feature_maps", 12);
    const auto a = tensor_bytes(short_run->dir.file("best.safetensors")),
               b = tensor_bytes(long_run->dir.file("best.safetensors"));
    for (const auto& [name, bytes] : b) {
      INFO(name);
      if (is_map(name))
        CHECK(bytes == a.at(name));  // the same seed's initialisation, untouched
      else if (name.find("weight") != std::string::npos)
        CHECK(bytes != a.at(name));
    }
  }
  SECTION("lora: only the adapters train; the base keeps the source's bytes") {
    auto short_run = finetune("lora", 4, 2), long_run = finetune("lora", 12, 2);
    const auto a = tensor_bytes(short_run->dir.file("best.safetensors")),
               b = tensor_bytes(long_run->dir.file("best.safetensors"));
    int adapters = 0;
    for (const auto& [name, bytes] : b) {
      INFO(name);
      if (name.find("_lora.") != std::string::npos) {
        ++adapters;
        if (name.find(".b") != std::string::npos) CHECK(bytes != a.at(name));  // B starts at 0 and trains
      } else {
        CHECK(bytes == before.at(name));
      }
    }
    CHECK(adapters == 2 * 4);  // 2 layers x (qkv, o) x (a, b)
    CHECK(long_run->of_type("conversion").at(0)["created"].size() == 8);
    // Merged: a plain checkpoint (no adapter tensors) that continues a prompt exactly as the adapted one.
    const auto merged = long_run->dir.file("merged.safetensors");
    auto m = test::run_command(
        fmt::format("{} merge-lora {} {}", FWLAB_WORKER, long_run->dir.file("best.safetensors"), merged));
    INFO(m.output);
    REQUIRE(m.exit_code == 0);
    for (const auto& [name, bytes] : tensor_bytes(merged)) CHECK(name.find("_lora") == std::string::npos);
    auto continuation = [&](const std::string& checkpoint) {
      auto g = test::run_command(
          fmt::format("{} generate {} --prompt 'The jury' --tokens 24 --greedy", FWLAB_WORKER, checkpoint));
      REQUIRE(g.exit_code == 0);
      return g.output.substr(0, g.output.find('\n'));
    };
    CHECK(continuation(merged) == continuation(long_run->dir.file("best.safetensors")));
    CHECK(test::run_command(fmt::format("{} merge-lora {} {}", FWLAB_WORKER, source, merged))
              .output.find("has no LoRA adapters") != std::string::npos);
  }
  SECTION("groups that leave nothing to train, or no group: exit 2 naming the key") {
    run_refused("trainable", "new_mixers", "train.trainable: 'new_mixers' leaves nothing to train");  // all softmax
    run_refused("trainable", "lora", "train.trainable: 'lora' leaves nothing to train: the model has no LoRA adapters");
    run_refused("trainable", "everything", "train.trainable: 'everything' is not one of");
  }
}

TEST_CASE("worker: kind = transfer trains the new mixers to imitate the teacher; a finetune starts from it",
          "[worker]") {
  Job pretrain;
  const auto source = pretrain_teacher(pretrain);
  const json decay = {
      {"mixer", {{"kind", "fast_weight"}, {"rule", "decay"}, {"feature_map", "identity"}, {"norm", "none"}, {"m", 4}}}};
  Job transfer;
  auto spec = tiny_job();
  spec.erase("model");
  spec["kind"] = "transfer";
  spec["init_checkpoint"] = source;
  spec["model"] = decay;
  spec["optim"]["lr"] = 1e-2;
  transfer.write(spec);
  auto r = transfer.run();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto start = transfer.of_type("start").at(0);
  CHECK(start["transfer"]["layers"] == json::array({0, 1}));
  CHECK(start["trainable"]["which"] == "new_mixers");
  for (const char* key : {"transfer_mse.0", "transfer_mse.1"}) {
    std::vector<double> curve;
    for (auto& e : transfer.of_type("metric"))
      if (e["key"] == key) curve.push_back(e["value"].get<double>());
    INFO(key);
    REQUIRE(curve.size() == 6);
    CHECK(curve.back() < curve.front());  // the layer's output moves toward the teacher's
  }
  Job finetune;  // swap-then-finetune's second stage, from the transferred model
  auto ft = tiny_job();
  ft.erase("model");
  ft["init_checkpoint"] = transfer.dir.file("best.safetensors");
  ft["model"] = decay;
  ft["train"]["steps"] = 4;
  finetune.write(ft);
  auto f = finetune.run();
  INFO(f.output);
  CHECK(f.exit_code == 0);
  CHECK(finetune.of_type("conversion").at(0)["created"].empty());  // the same mixers: everything carried over
  CHECK(finetune.of_type("conversion")
            .at(0)["rescaled"]
            .empty());  // W_v was rescaled once, when the layer was swapped in

  Job distilled;  // the same fine-tuning plus KL(teacher || student); the teacher is found up the chain (pretrain)
  auto kd = ft;
  kd["transfer"] = {{"kl_weight", 2.0}, {"kl_temperature", 2.0}};
  distilled.write(kd);
  auto d = distilled.run();
  INFO(d.output);
  REQUIRE(d.exit_code == 0);
  CHECK(distilled.of_type("start").at(0)["transfer"]["kl_weight"] == 2.0);
  const auto first_loss = [](const Job& j) {
    for (auto& e : j.of_type("metric"))
      if (e["key"] == "train_loss") return e["value"].get<double>();
    return -1.0;
  };
  CHECK(first_loss(distilled) > first_loss(finetune) + 1e-3);  // CE + 2 KL at the same first batch and weights
  Job idle;                                                    // a temperature without a KL weight would change nothing
  kd["transfer"] = {{"kl_temperature", 2.0}};
  idle.write(kd);
  CHECK_THAT(idle.run("validate").output,
             Catch::Contains("transfer.kl_temperature: is set but transfer.kl_weight is 0"));

  Job orphan;  // no teacher
  spec.erase("init_checkpoint");
  orphan.write(spec);
  CHECK_THAT(orphan.run("validate").output, Catch::Contains("init_checkpoint: kind 'transfer' needs the teacher"));
}

TEST_CASE("worker: kind = attention compares a model's attention with the softmax teacher up its source chain",
          "[worker]") {
  Job pretrain;
  const auto source = pretrain_teacher(pretrain);
  const json t2r = {
      {"mixer", {{"kind", "fast_weight"}, {"rule", "add"}, {"feature_map", "relu"}, {"norm", "attn"}, {"m", 8}}}};
  const auto metrics = [](const Job& j) {
    std::map<std::string, double> out;
    for (auto& e : j.of_type("metric")) out[e["key"].get<std::string>()] = e["value"].get<double>();
    return out;
  };
  auto analysis = tiny_job();
  analysis.erase("model");
  analysis["kind"] = "attention";
  analysis["attention"] = {{"max_tokens", 512}};
  const auto run_analysis = [&](Job& job, const std::string& checkpoint, const json& model) {
    auto spec = analysis;
    spec["init_checkpoint"] = checkpoint;
    if (!model.is_null()) spec["model"] = model;
    job.write(spec);
    const auto r = job.run();
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(job.status()["status"] == "finished");
    return metrics(job);
  };

  Job self;  // the softmax teacher against itself
  const auto same = run_analysis(self, source, nullptr);
  CHECK(same.at("attn_distance") == 0.0);
  CHECK(same.at("attn_entropy") == Approx(same.at("teacher_entropy")));
  CHECK(self.of_type("attention").at(0)["tokens"] == 16 * 32);  // 16 windows of 32
  Job before;  // converted, untrained: its teacher is the checkpoint it converts
  const auto untrained = run_analysis(before, source, t2r);
  CHECK(untrained.at("attn_distance") > 0.01);
  // The overall figure is the mean of the per-head ones.
  double heads = 0;
  for (const char* key : {"attn_distance.l0.h0", "attn_distance.l0.h1", "attn_distance.l1.h0", "attn_distance.l1.h1"})
    heads += untrained.at(key);
  CHECK(untrained.at("attn_distance") == Approx(heads / 4));
  CHECK(untrained.at("attn_distance.l1") ==
        Approx((untrained.at("attn_distance.l1.h0") + untrained.at("attn_distance.l1.h1")) / 2));

  Job finetune;  // after fine-tuning: the teacher is found through the fine-tune's job.json
  auto ft = tiny_job();
  ft.erase("model");
  ft["init_checkpoint"] = source;
  ft["model"] = t2r;
  ft["train"]["steps"] = 8;
  finetune.write(ft);
  REQUIRE(finetune.run().exit_code == 0);
  Job after;
  const auto tuned = run_analysis(after, finetune.dir.file("best.safetensors"), nullptr);
  CHECK(after.of_type("attention").at(0)["teacher"] == source);
  CHECK(tuned.at("teacher_entropy") == Approx(untrained.at("teacher_entropy")));  // the same teacher on the same text
  CHECK(tuned.at("attn_distance") != untrained.at("attn_distance"));

  Job orphan;  // a fast-weight checkpoint with no job.json beside it: no teacher to find
  test::TempDir lone("lone");
  fs::copy_file(finetune.dir.file("best.safetensors"), lone.file("model.safetensors"));
  auto spec = analysis;
  spec["init_checkpoint"] = lone.file("model.safetensors");
  orphan.write(spec);
  const auto r = orphan.run();
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("attention.teacher: no softmax-only model up the source chain of"));
}

TEST_CASE("divergence check: a loss wobbling near zero is no spike, a blow-up is", "[worker]") {
  // The shape of a recorded MQAR run (vocabulary 256, 4 pairs): at chance (ln 4) until step 3,000, learned by
  // step 3,600 (0.99 accuracy), then five steps at 0.11 against a minimum of 0.02 at step 3,713.
  std::vector<double> mqar;
  for (int step = 0; step < 4000; ++step) {
    const double wobble = 0.01 * ((step * 7919) % 13 - 6) / 6.0;
    double loss = step < 3000 ? std::log(4.0) + wobble
                              : std::max(0.02, std::log(4.0) * (3600 - step) / 600.0) + std::fabs(wobble);
    if (step >= 3713 && step < 3718) loss = 0.11;
    mqar.push_back(loss);
  }
  const auto first_divergence = [](const std::vector<double>& curve, const DivergenceSpec& d) {
    SpikeWatch watch;
    for (size_t i = 0; i < curve.size(); ++i)
      if (watch.diverged_after(curve[i], d)) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  DivergenceSpec d;
  CHECK(first_divergence(mqar, d) == -1);
  DivergenceSpec ratio_only = d;  // the rule before the rise floor: the learned run was recorded as diverged
  ratio_only.spike_min_rise = 0;
  CHECK(first_divergence(mqar, ratio_only) == 3717);

  std::vector<double> blow_up(200, 2.3);  // a language model at 2.3 nats whose loss jumps to 8 and stays
  for (size_t i = 120; i < blow_up.size(); ++i) blow_up[i] = 8.0;
  CHECK(first_divergence(blow_up, d) == 124);
  blow_up[122] = 2.4;  // an interruption restarts the count
  CHECK(first_divergence(blow_up, d) == 127);
}

TEST_CASE("divergence check: batches of unequal difficulty are each compared with their own kind", "[worker]") {
  // Zoology's MQAR mix: 5 batches in 9 at (64, 4), learned early (0.3 nats), the others at (256, 64) still at 3
  // nats; runs of five hard batches happen by chance there and are no blow-up.
  std::mt19937 rng(7);
  std::bernoulli_distribution hard(4.0 / 9.0);
  std::vector<std::string> kinds;
  for (int step = 0; step < 3000; ++step) kinds.push_back(hard(rng) ? "(256,64)" : "(64,4)");
  const auto first_divergence = [&](bool with_kinds, int blow_up_from) {
    SpikeWatch watch;
    for (int step = 0; step < 3000; ++step) {
      const double loss = step >= blow_up_from ? 12.0 : kinds[static_cast<size_t>(step)] == "(64,4)" ? 0.3 : 3.0;
      if (watch.diverged_after(loss, DivergenceSpec{}, with_kinds ? kinds[static_cast<size_t>(step)] : "")) return step;
    }
    return -1;
  };
  CHECK(first_divergence(true, 3000) == -1);
  CHECK(first_divergence(false, 3000) >= 0);    // one minimum for all: the run was stopped as diverged
  CHECK(first_divergence(true, 2000) == 2004);  // a real blow-up still is one, kinds and all
}
