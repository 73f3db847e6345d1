// job.json checking and the append-only event record.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/test_support.h"
#include "contract/job/events.h"
#include "contract/job/job_spec.h"
#include "contract/job/model_dtype.h"

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
  CHECK(spec_error(R"({"kind": "sweep"})") ==
        "kind: 'sweep' is not one of train, transfer, attention, generation-bench, eval, translate");
  CHECK(spec_error(R"({"kind": "transfer"})") ==
        "init_checkpoint: kind 'transfer' needs the teacher: a checkpoint with the softmax layers to imitate");
  CHECK(spec_error(R"({"transfer": {"mse_weight": 0}})") == "transfer.mse_weight: must be positive, got 0");
  CHECK(spec_error(R"({"transfer": {"ce_weight": -1}})") == "transfer.ce_weight: must be >= 0, got -1");
  CHECK(spec_error(R"({"kind": "attention"})") ==
        "init_checkpoint: kind 'attention' analyses a checkpoint: set init_checkpoint (or a stage's from)");
  CHECK(spec_error(R"({"kind": "attention", "init_checkpoint": "x", "data": {"source": "mqar"}})") ==
        "data.source: kind 'attention' compares attention on validation text; 'mqar' has none");
  CHECK(spec_error(R"({"attention": {"max_tokens": 0}})") == "attention.max_tokens: must be positive, got 0");
  CHECK(spec_error(R"({"train": {"precision": "fp64"}})") == "train.precision: 'fp64' is not one of fp32, bf16, fp16");
  CHECK(spec_error(R"({"train": {"trainable": "none"}})") ==
        "train.trainable: 'none' is not one of all, new_mixers, no_feature_maps, lora");
  CHECK(spec_error(R"({"optim": {"lr": -1}})") == "optim.lr: must be positive, got -1");
  CHECK(spec_error(R"({"optim": {"lrr": 1}})") == "optim.lrr: unknown key (did you mean 'lr'?)");
  CHECK(spec_error(R"({"train": {"steps": "many"}})") == "train.steps: must be an integer, got \"many\"");
  CHECK(spec_error(R"({"data": {"source": "pile"}})") ==
        "data.source: 'pile' is not one of brown, wikitext103, enwik8, tokens, mqar, retrieval, parallel");
  CHECK(spec_error(R"({"data": {"source": "enwik8"}})") == "data.path: is required for source 'enwik8'");
  CHECK(spec_error(R"({"data": {"source": "mqar", "mqar": {"pairs": 40, "seq_len": 64}}})") ==
        "data.mqar.seq_len: 64 is too short for 40 pairs and their queries (needs >= 159)");
  CHECK(spec_error(R"({"data": {"source": "retrieval", "retrieval": {"pairs": 20}}})") ==
        "data.retrieval.pairs: 20 distinct keys do not fit in keys = 16");
  CHECK(spec_error(R"({"data": {"source": "retrieval", "retrieval": {"pairs": 4, "queries": 5}}})") ==
        "data.retrieval.queries: must be in [0, pairs = 4] (each asks a distinct key; 0: all), got 5");
  CHECK(spec_error(
            R"({"data": {"source": "retrieval", "retrieval": {"keys": 8, "values": 8}}, "model": {"vocab": 64}})") ==
        "model.vocab: must be >= 80 (retrieval: keys + values + keys * values tokens)");
  CHECK(
      spec_error(
          R"({"data": {"source": "retrieval", "retrieval": {"pairs": 16, "queries": 0}}, "model": {"vocab": 288, "context": 16}})") ==
      "model.context: 16 is shorter than the 32 tokens this job feeds");
  CHECK(spec_error(R"({"model": {"mixer": {"kind": "fast_weight", "rule": "decay", "norm": "attn", "m": 4}}})") ==
        "model.layers[0].norm: 'attn' normalization is not defined for rule 'decay' (Mao 2022, Table 1: N/A); use "
        "'none'");
  CHECK(spec_error(R"({"model": {"vocab": 100}})") ==
        "model.vocab: 100 is smaller than the byte tokenizer's vocabulary");
  CHECK(spec_error(R"({"model": {"context": 64}, "train": {"seq_len": 128}})") ==
        "model.context: 64 is shorter than the 128 tokens this job feeds");
  CHECK(spec_error(R"({"seed": -3})") == "seed: must be >= 0, got -3");
  CHECK(spec_error(R"({"divergence": {"spike_factor": 0.5}})") == "divergence.spike_factor: must be > 1, got 0.5");
  CHECK(spec_error(R"({"bench": {"seq_lens": []}})") == "bench.seq_lens: must not be empty");
  CHECK(spec_error(R"([1, 2])") == "job: must be an object");
}

TEST_CASE("job spec: an MQAR mix and test points, the log evaluation schedule, the op profile", "[spec]") {
  const auto mqar = [](const std::string& more) {
    return R"({"data": {"source": "mqar", "mqar": {"vocab": 8192)" + more +
           R"(}}, "model": {"vocab": 8192, "context": 1024}})";
  };
  auto s = parse_job_spec(
      nlohmann::json::parse(mqar(R"(, "mix": [[64, 4, 5], [256, 64, 1]], "test_points": [[1024, 256]])")), "/repo");
  CHECK(s.data.task_seq_len() == 1024);  // the longest sequence fed: the context must hold it
  CHECK(s.data.mqar.mix.size() == 2);
  CHECK(s.data.mqar.mix[0].weight == 5.0);
  CHECK(spec_error(mqar(R"(, "mix": [[128, 8, 1]])")) ==
        "data.mqar.mix: its first point (128, 8) differs from seq_len = 64 and pairs = 4, which name the first point");
  CHECK(spec_error(mqar(R"(, "mix": [[64, 4, 1], [64, 40, 1]])")) ==
        "data.mqar.mix[1]: 64 is too short for 40 pairs and their queries (needs >= 159)");
  CHECK(spec_error(mqar(R"(, "mix": [[64, 4]])")) ==
        "data.mqar.mix: must be [[seq_len, pairs, weight], ...], got [[64,4]]");
  CHECK(spec_error(mqar(R"(, "mix": [[64, 4, 0]])")) == "data.mqar.mix[0]: its weight must be positive, got 0");
  CHECK(spec_error(mqar(R"(, "test_points": [[64, 4], [64, 8], [64, 16]])")) ==
        "eval.mqar_batches: MQAR evaluates its 3 points in turn: a multiple of 3, got 8");
  CHECK(spec_error(R"({"eval": {"schedule": "log"}})") ==
        "eval.count: schedule = 'log' spaces `count` evaluations from step 1 to the last: at least 2, got 0");
  CHECK(spec_error(R"({"eval": {"count": 5}})") == "eval.count: applies to schedule = 'log' only");
  CHECK(spec_error(R"({"debug": {"profile_steps": 95}})") ==
        "debug.profile_steps: profiling starts after 10 steps: 95 more would pass train.steps = 100");
  CHECK(spec_error(R"({"debug": {"profile_shapes": true}})") ==
        "debug.profile_shapes: tells the operators of a profile apart: set debug.profile_steps too");
}

TEST_CASE("eval schedule: every N, and log-spaced points from step 1 to the last", "[spec]") {
  EvalSpec e;
  e.every = 0, e.schedule = "log", e.count = 4;  // 1000^(i/3): 1, 10, 100, 1000
  std::vector<int64_t> due;
  for (int64_t step = 1; step <= 1000; ++step)
    if (e.due(step, 1000)) due.push_back(step);
  CHECK(due == std::vector<int64_t>{1, 10, 100, 1000});
  e.every = 400;  // beside the log points
  due.clear();
  for (int64_t step = 1; step <= 1000; ++step)
    if (e.due(step, 1000)) due.push_back(step);
  CHECK(due == std::vector<int64_t>{1, 10, 100, 400, 800, 1000});
  EvalSpec plain;
  plain.every = 0;
  CHECK_FALSE(plain.due(5, 10));
  CHECK(plain.due(10, 10));
}

TEST_CASE("job spec: model.dtype is taken out of the model keys and checked against the job", "[spec]") {
  const auto eval = parse_job_spec(
      nlohmann::json::parse(R"({"kind": "eval", "init_checkpoint": "hf:/m", "model": {"dtype": "bfloat16"},
      "tasks": {"lambada": {"path": "x.jsonl"}}})"),
      "/repo");
  CHECK(eval.model_dtype == "bfloat16");
  CHECK(eval.model.empty());  // the architecture never sees it
  CHECK(parse_job_spec(nlohmann::json::parse(R"({"model": {"n_layers": 2}})"), "/repo").model_dtype == "float32");
  CHECK(spec_error(R"({"model": {"dtype": "bfloat16"}})") ==
        "model.dtype: kind 'train' trains float32 weights ('bfloat16' would let the optimizer lose updates smaller "
        "than a 16-bit weight's "
        "spacing): use train.precision = \"bf16\" to compute in bfloat16");
  CHECK(spec_error(R"({"kind": "generation-bench", "model": {"dtype": "file"}})") ==
        "model.dtype: 'file' is the checkpoint's dtype, and this job starts from no checkpoint (init_checkpoint)");
  CHECK(spec_error(R"({"kind": "generation-bench", "model": {"dtype": "fp16"}})") ==
        "model.dtype: 'fp16' is not one of float32, bfloat16, float16, file");
  CHECK(spec_error(R"({"kind": "generation-bench", "model": {"dtype": 16}})") ==
        "model.dtype: must be a string, got 16");
  CHECK(architecture_keys(nlohmann::json::parse(R"({"dtype": "file", "n_layers": 2})")) ==
        nlohmann::json::parse(R"({"n_layers": 2})"));
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
  write_status(dir.path().string(), StatusFile{JobStatus::running, {}, "", "", {{"pid", 7}}});
  write_status(dir.path().string(),
               StatusFile{JobStatus::diverged, kExitDiverged, "loss_spike", "loss_spike at step 9", {{"step", 9}}});
  auto j = nlohmann::json::parse(test::slurp(dir.file("status.json")));
  CHECK(j["status"] == "diverged");
  CHECK(j["exit_code"] == 3);
  CHECK(j["step"] == 9);
  CHECK(!j.contains("pid"));
  CHECK(!std::filesystem::exists(dir.file("status.json.tmp")));
  const auto back = read_status(dir.path().string());
  REQUIRE(back);
  CHECK(back->status == JobStatus::diverged);
  CHECK(back->exit_code == 3);
  CHECK(back->cause == "loss_spike");
  CHECK(back->details["step"] == 9);
  test::spit(dir.file("status.json"), R"({"status": "exploded"})");
  CHECK(!read_status(dir.path().string()));  // a state no one knows is no state
}

TEST_CASE("every job status has one name, and the names read back", "[events]") {
  for (auto s : {JobStatus::pending, JobStatus::submitted, JobStatus::running, JobStatus::finished, JobStatus::diverged,
                 JobStatus::failed, JobStatus::crashed, JobStatus::timeout, JobStatus::blocked, JobStatus::interrupted,
                 JobStatus::cancelled})
    CHECK(parse_job_status(to_string(s)) == s);
  CHECK(!parse_job_status("Finished"));
  CHECK(sql_list({JobStatus::pending, JobStatus::running}) == "'pending', 'running'");
  CHECK(status_of_exit(kExitInterrupted) == JobStatus::interrupted);
  CHECK(status_of_exit(137) == JobStatus::crashed);
}

TEST_CASE("typed events: what the worker writes, ingestion reads back", "[events]") {
  EventReader reader;
  auto round_trip = [&](const nlohmann::json& written) {
    auto line = written;
    line["seq"] = 5;
    line["time"] = 1.5;
    auto r = reader.read(line.dump());
    REQUIRE(r);
    CHECK(r->seq == 5);
    CHECK(r->time == 1.5);
    CHECK(r->type == written["type"]);
    return r->event;
  };
  auto m = std::get<MetricEvent>(round_trip(to_json(MetricEvent{"train_loss", 12, 2.25})));
  CHECK((m.key == "train_loss" && m.step == 12 && m.value == 2.25));
  auto inf = std::get<MetricEvent>(round_trip(to_json(MetricEvent{"grad_norm", 3, HUGE_VAL})));
  CHECK(std::isinf(inf.value));
  CHECK(std::isnan(std::get<MetricEvent>(round_trip(to_json(MetricEvent{"x", 1, std::nan("")}))).value));
  EvalEvent ev;
  ev.split = "test";
  ev.step = 40;
  ev.checkpoint = "best";
  ev.loss = 1.25;
  ev.accuracy = 0.5;
  ev.tokens = 640;
  auto e = std::get<EvalEvent>(round_trip(to_json(ev)));
  CHECK((e.split == "test" && e.step == 40 && e.checkpoint == "best" && e.loss == 1.25 && e.accuracy == 0.5 &&
         e.tokens == 640));
  CHECK(!e.ppl);
  auto d = std::get<DivergenceEvent>(
      round_trip(to_json(DivergenceEvent{7, "nonfinite_loss", "nan", 2.5, 0.01, 3, nullptr})));
  CHECK((d.step == 7 && d.cause == "nonfinite_loss" && d.value == "nan" && d.last_finite_loss == 2.5 && d.lr == 0.01));
  CHECK(d.first_nonfinite_layer == 3);
  auto end = std::get<EndEvent>(
      round_trip(to_json(EndEvent{JobStatus::failed, kExitBadSpec, "bad_data", "no corpus", {{"step", 0}}})));
  CHECK(
      (end.status == JobStatus::failed && end.exit_code == 2 && end.cause == "bad_data" && end.reason == "no corpus"));
  CHECK(end.details["step"] == 0);
  auto start = std::get<StartEvent>(round_trip(to_json(StartEvent{"node7", 1234, {{"device", "cuda"}}})));
  CHECK((start.host == "node7" && start.params == 1234 && start.details["device"] == "cuda"));
  CHECK(std::get<OtherEvent>(round_trip({{"type", "checkpoint"}, {"kind", "best"}})).type == "checkpoint");
  // Damaged lines: a string where a number belongs reads as absent; a line that is not an object, as nothing.
  auto odd = reader.read(R"({"type":"eval","split":"valid","step":"x","loss":"high"})");
  REQUIRE(odd);
  CHECK(std::get<EvalEvent>(odd->event).step == 0);
  CHECK(!std::get<EvalEvent>(odd->event).loss);
  CHECK(!reader.read("[1, 2]"));
  CHECK(!reader.read("{\"type\": \"metric\""));
}

TEST_CASE("job spec: translation keys are checked against the kind, the corpus and the model", "[spec]") {
  const std::string parallel =
      R"("data": {"source": "parallel", "path": "/c", "src": "de", "tgt": "en", "vocab_size": 100})";
  const std::string model =
      R"("model": {"vocab": 100, "encoder_layers": 1, "n_layers": 1, "d_model": 16, "n_heads": 2, "head_dim": 8)";
  const auto translate = [&](const std::string& extra) {
    return spec_error("{\"kind\": \"translate\", " + parallel + ", " + model + "}" + extra + "}");
  };
  CHECK(translate("") == "");
  CHECK(translate(R"(, "train": {"seq_len": 64})") ==
        "train.seq_len: changes nothing in a translation job (translate.batch_tokens sets its batches)");
  CHECK(translate(R"(, "translate": {"penalty": "wu"})") == "translate.penalty: 'wu' is not one of fairseq, gnmt");
  CHECK(translate(R"(, "translate": {"beam": 0})") == "translate.beam: must be in [1, 1024] (1: greedy), got 0");
  CHECK(spec_error(R"({"kind": "translate"})") ==
        "data.source: kind 'translate' reads a parallel corpus (data.source = \"parallel\"), not 'brown'");
  CHECK(spec_error(R"({"translate": {"beam": 2}})") ==
        "translate: is read by kind 'translate' only; this job is kind 'train'");
  CHECK(spec_error(
            R"({"kind": "translate", "data": {"source": "parallel", "path": "/c", "tgt": "en", "vocab_size": 100}})") ==
        "data.src: a parallel corpus needs both languages: data.src and data.tgt name the file suffixes (train.de, "
        "train.en)");
  CHECK(
      spec_error(
          R"({"kind": "translate", "data": {"source": "parallel", "path": "/c", "src": "de", "tgt": "en", "vocab": "a.model", "vocab_size": 10}})") ==
      "data.vocab_size: give one vocabulary: vocab (a SentencePiece model file) or vocab_size (a joint BPE learned on "
      "the training split)");
  CHECK(spec_error(R"({"data": {"source": "brown", "src": "de"}})") ==
        "data.src: is a parallel corpus's key; data.source is 'brown'");
  CHECK(spec_error("{" + model + "}}") ==
        "model.encoder_layers: an encoder-decoder is trained by kind 'translate' (and timed by 'generation-bench'), "
        "not 'train'");
  CHECK(spec_error(R"({"model": {"cross": {"kind": "softmax"}}})")
            .find("model.cross: changes nothing without an encoder") == 0);
  CHECK(spec_error("{\"kind\": \"translate\", " + parallel + ", " + model + R"(, "positions": "learned"}})") ==
        "model.positions: the encoder-decoder uses sinusoidal positions, not 'learned'");
  CHECK(
      spec_error(
          "{\"kind\": \"translate\", " + parallel + ", " + model +
          R"(, "cross": {"kind": "fast_weight", "rule": "decay", "feature_map": "identity", "norm": "none", "m": 4}}})") ==
      "model.cross.rule: cross attention sums the source (rule 'add'), got 'decay'");
  CHECK(
      spec_error(
          "{\"kind\": \"translate\", " + parallel +
          R"(, "model": {"vocab": 50, "encoder_layers": 1, "n_layers": 1, "d_model": 16, "n_heads": 2, "head_dim": 8}})") ==
      "model.vocab: 50 is smaller than data.vocab_size = 100");
}
