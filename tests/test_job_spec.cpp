// job.json checking and the append-only event record.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/test_support.h"
#include "worker/events.h"
#include "worker/job_spec.h"

using namespace fwlab;

namespace {

std::string spec_error(const std::string& text) {
  try {
    parse_job_spec(nlohmann::json::parse(text), "/repo");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("job spec: defaults and resolved paths", "[spec]") {
  auto s = parse_job_spec(nlohmann::json::parse(R"({"model": {"n_layers": 2}})"), "/repo");
  CHECK(s.kind == "train");
  CHECK(s.data.path == "/repo/data/brown");
  CHECK(s.data.bpe_dir == "/repo/data/gpt2-bpe");
  CHECK(s.optim.grad_clip == 1.0);
}

TEST_CASE("job spec: bad specs name the key at fault", "[spec]") {
  CHECK(spec_error(R"({"kind": "sweep"})") == "kind: 'sweep' is not one of train, generation-bench");
  CHECK(spec_error(R"({"optim": {"lr": -1}})") == "optim.lr: must be positive, got -1");
  CHECK(spec_error(R"({"optim": {"lrr": 1}})") == "optim.lrr: unknown key (did you mean 'lr'?)");
  CHECK(spec_error(R"({"train": {"steps": "many"}})") == "train.steps: must be an integer, got \"many\"");
  CHECK(spec_error(R"({"data": {"source": "pile"}})") == "data.source: 'pile' is not one of brown, wikitext103, enwik8, tokens, mqar");
  CHECK(spec_error(R"({"data": {"source": "enwik8"}})") == "data.path: is required for source 'enwik8'");
  CHECK(spec_error(R"({"data": {"source": "mqar", "mqar": {"pairs": 40, "seq_len": 64}}})") ==
        "data.mqar.seq_len: 64 is too short for 40 pairs and their queries (needs >= 159)");
  CHECK(spec_error(R"({"model": {"mixer": {"kind": "fast_weight", "rule": "decay", "norm": "attn", "m": 4}}})") ==
        "model.layers[0].norm: 'attn' normalization is not defined for rule 'decay' (Mao 2022, Table 1: N/A); use 'none'");
  CHECK(spec_error(R"({"model": {"vocab": 100}})") == "model.vocab: 100 is smaller than the byte tokenizer's vocabulary");
  CHECK(spec_error(R"({"model": {"context": 64}, "train": {"seq_len": 128}})") ==
        "model.context: 64 is shorter than the 128 tokens this job feeds");
  CHECK(spec_error(R"({"seed": -3})") == "seed: must be >= 0, got -3");
  CHECK(spec_error(R"({"divergence": {"spike_factor": 0.5}})") == "divergence.spike_factor: must be > 1, got 0.5");
  CHECK(spec_error(R"({"bench": {"seq_lens": []}})") == "bench.seq_lens: must not be empty");
  CHECK(spec_error(R"([1, 2])") == "job: must be an object");
}

TEST_CASE("event log: numbered lines, torn last line tolerated and repaired", "[events]") {
  test::TempDir dir("events");
  const auto path = dir.file("events.jsonl");
  {
    EventLog log(path);
    log.write({{"type", "start"}});
    log.write({{"type", "metric"}, {"step", 1}, {"key", "train_loss"}, {"value", 2.5}});
  }
  auto full = test::slurp(path);
  // A kill in the middle of a write leaves part of a line.
  test::spit(path, full + R"({"type": "metric", "step": 2, "ke)");
  auto r = read_events(path);
  REQUIRE(r.events.size() == 2);
  CHECK(r.torn_tail);
  CHECK(r.end_offset == full.size());
  CHECK(r.events[1]["value"] == 2.5);
  CHECK(r.events[1]["seq"] == 1);
  // Reading on from the offset returns nothing new until the line is complete.
  CHECK(read_events(path, r.end_offset).events.empty());
  {
    EventLog log(path);  // the next writer cuts the torn line and continues the numbering
    CHECK(log.repaired_torn_line());
    log.write({{"type", "end"}});
  }
  auto after = read_events(path);
  REQUIRE(after.events.size() == 3);
  CHECK(!after.torn_tail);
  CHECK(after.bad_lines == 0);
  CHECK(after.events[2]["type"] == "end");
  CHECK(after.events[2]["seq"] == 2);
  auto incremental = read_events(path, r.end_offset);
  REQUIRE(incremental.events.size() == 1);
  CHECK(incremental.events[0]["type"] == "end");
}

TEST_CASE("status.json is replaced atomically", "[events]") {
  test::TempDir dir("status");
  write_status(dir.path().string(), {{"status", "running"}});
  write_status(dir.path().string(), {{"status", "finished"}, {"exit_code", 0}});
  auto j = nlohmann::json::parse(test::slurp(dir.file("status.json")));
  CHECK(j["status"] == "finished");
  CHECK(!std::filesystem::exists(dir.file("status.json.tmp")));
}
