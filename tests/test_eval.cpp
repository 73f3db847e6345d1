// kind = "eval" jobs: lm-eval's multiple-choice and log-likelihood tasks against an independent Python
// computation (tests/python/lm_eval_ref.py, written from lm-eval's documented semantics over the float64 reference
// model tests/python/hf_llama.py and the reference tokenizer tests/python/hf_tokenizer.py), passkey prompts, and
// bad task files refused before anything runs.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "contract/evaluation/tasks/tasks.h"
#include "tests/test_support.h"
#include "text/batches/passkey.h"
#include "text/tokenizers/tokenizer.h"

using namespace fwlab;
namespace fs = std::filesystem;

namespace {

const std::string kPython = "/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/";

// The task files: ties (identical choices), multi-token continuations, leading spaces in choices, a context with
// trailing spaces (moved to the continuation), HellaSwag's [title] / [step] tags, MMLU shots past the context.
const std::map<std::string, std::string> kTaskFiles = {
    {"piqa.jsonl", R"({"goal": "Open a jar", "sol1": "Twist the lid.", "sol2": "Twist the lid.", "label": 1}
{"goal": "Dry hair", "sol1": " Use a towel, then a comb.", "sol2": "Use water.", "label": 0}

{"goal": "Boil an egg", "sol1": "Put it in hot water for ten minutes.", "sol2": "Freeze it.", "label": 0}
)"},
    {"arc.jsonl",
     R"({"question": "Which is a gas?", "choices": {"text": ["ice", "steam", "rock"], "label": ["A", "B", "C"]}, "answerKey": "B"}
{"question": "What do plants need?", "choices": {"text": ["light", "sand", "metal", "plastic"], "label": ["1", "2", "3", "4"]}, "answerKey": "1"}
{"question": "What melts?", "choices": {"text": ["snow in the sun", "a stone", "glass"], "label": ["A", "B", "C"]}, "answerKey": "A"}
)"},
    {"hellaswag.jsonl",
     R"({"activity_label": "Baking cookies", "ctx_a": "A woman mixes flour.", "ctx_b": "she THEN adds [step] eggs", "endings": [" pours milk [title] Stir.  Done ", "eats it", "sings", "runs away"], "label": "1"}
{"activity_label": "Running", "ctx_a": "A man runs.", "ctx_b": "he", "endings": ["stops.", "flies.", "swims.", "sleeps."], "label": 0}
)"},
    {"winogrande.jsonl",
     R"({"sentence": "The cup fell off the shelf because _ was unstable.", "option1": "the cup", "option2": "the shelf", "answer": "2"}
{"sentence": "Anna gave Beth a gift because _ was kind.", "option1": "Anna", "option2": "Beth", "answer": "1"}
{"sentence": "The sun was hot so _ stayed inside.", "option1": "we", "option2": "it", "answer": "1"}
)"},
    {"copa.jsonl",
     R"({"premise": "The man broke his toe.", "choice1": "He dropped a hammer.", "choice2": "He wore socks.", "question": "cause", "label": 0}
{"premise": "I was hungry.", "choice1": "I ate food.", "choice2": "I slept.", "question": "effect", "label": 1}
{"premise": "It rained.", "choice1": "The grass got wet.", "choice2": "The grass got wet.", "question": "effect", "label": 1}
)"},
    {"openbookqa.jsonl",
     R"({"question_stem": "The sun is  ", "choices": {"text": ["a star", "a moon", "a planet", "a comet"], "label": ["A", "B", "C", "D"]}, "answerKey": "A"}
{"question_stem": "Water freezes at", "choices": {"text": ["0 C", "50 C", "100 C", "20 C"], "label": ["A", "B", "C", "D"]}, "answerKey": " A"}
)"},
    {"mmlu.jsonl",
     R"({"question": "A long question about numbers that goes on for a while so that the prompt with its example no longer fits: what is 2+2?", "subject": "high_school_math", "choices": ["3", "4", "5", "6"], "answer": 1}
{"question": "Capital of France?", "subject": "geography", "choices": ["Paris", "Rome", "Berlin", "Madrid"], "answer": 0}
{"question": "What is 3+3?", "subject": "high_school_math", "choices": ["6", "7", "8", "9"], "answer": 0}
)"},
    {"mmlu_dev.jsonl",
     R"({"question": "What is 1+1?", "subject": "high_school_math", "choices": ["1", "2", "3", "4"], "answer": 1}
{"question": "Largest ocean?", "subject": "geography", "choices": ["Pacific", "Atlantic", "Indian", "Arctic"], "answer": 0}
{"question": "What is 5-1?", "subject": "high_school_math", "choices": ["4", "2", "3", "1"], "answer": 0}
)"},
    {"lambada.jsonl", R"({"text": "she looked at the old dog"}
{"text": "the cat sat  on the mat"}
{"text": "he said that the answer was forty-two"}
)"},
};

struct TaskCase {
  std::string name, adapter, file;
  int64_t shots = 0;
  std::string shot_file;
};

const std::vector<TaskCase> kCases = {
    {"piqa", "piqa", "piqa.jsonl"},
    {"arc_easy", "arc", "arc.jsonl"},
    {"hellaswag", "hellaswag", "hellaswag.jsonl"},
    {"winogrande", "winogrande", "winogrande.jsonl", 1, "winogrande.jsonl"},
    {"copa", "copa", "copa.jsonl"},
    {"openbookqa", "openbookqa", "openbookqa.jsonl"},
    {"mmlu", "mmlu", "mmlu.jsonl", 1, "mmlu_dev.jsonl"},
    {"lambada", "lambada", "lambada.jsonl", 2, "lambada.jsonl"},
};

// The largest id of tokenizer.json's vocabulary and added tokens, + 1: the model's vocabulary.
int64_t tokenizer_vocab(const fs::path& dir) {
  const auto j = nlohmann::json::parse(test::slurp((dir / "tokenizer.json").string()));
  int64_t top = 0;
  for (const auto& [token, id] : j["model"]["vocab"].items()) top = std::max(top, id.get<int64_t>());
  for (const auto& t : j["added_tokens"]) top = std::max(top, t["id"].get<int64_t>());
  return top + 1;
}

// A Llama 3-style tokenizer and a random Llama with `positions` of context in `dir`.
void write_model(const fs::path& dir, int64_t positions) {
  auto r = test::run_command(kPython + "hf_tokenizer.py make " + dir.string() + " --style llama3 --vocab-size 300");
  REQUIRE(r.exit_code == 0);
  r = test::run_command(
      fmt::format("{}hf_llama.py write {} --vocab {} --hidden 32 --intermediate 64 --layers 2 --heads 4 --kv-heads 2 "
                  "--positions {}",
                  kPython, dir.string(), tokenizer_vocab(dir), positions));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

nlohmann::json eval_job(const fs::path& model, const nlohmann::json& tasks) {
  return {{"kind", "eval"},
          {"init_checkpoint", "hf:" + model.string()},
          {"threads", 1},
          {"eval", {{"batch_size", 3}}},
          {"data", {{"source", "brown"}, {"tokenizer", "hf:" + model.string()}}},
          {"tasks", tasks}};
}

test::CommandResult run_worker(const fs::path& job_dir, const nlohmann::json& job, const char* command = "run") {
  fs::create_directories(job_dir);
  test::spit((job_dir / "job.json").string(), job.dump());
  return test::run_command(fmt::format("{} {} {} 2>&1", FWLAB_WORKER, command, job_dir.string()));
}

std::map<int64_t, nlohmann::json> records_by_line(const fs::path& file) {
  std::map<int64_t, nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    out[j["line"].get<int64_t>()] = j;
  }
  return out;
}

// Each task's `task` event, by task name.
std::map<std::string, nlohmann::json> task_events(const fs::path& events) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in(events);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "task") out[j["name"].get<std::string>()] = j;
  }
  return out;
}

std::map<std::string, nlohmann::json> task_metrics(const fs::path& events) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& [name, event] : task_events(events)) out[name] = event["metrics"];
  return out;
}

}  // namespace

TEST_CASE("eval: every adapter's log-likelihoods, acc and acc_norm equal an independent lm-eval computation",
          "[eval]") {
  test::TempDir tmp("eval-ref");
  const auto model = tmp.path() / "model";
  write_model(model, 64);  // 64 positions: MMLU's prompt with its example is left-truncated
  for (const auto& [name, text] : kTaskFiles) test::spit(tmp.file(name), text);
  nlohmann::json tasks = nlohmann::json::object();
  for (const auto& c : kCases) {
    tasks[c.name] = {{"adapter", c.adapter}, {"path", tmp.file(c.file)}};
    if (c.shots > 0) tasks[c.name].update({{"num_fewshot", c.shots}, {"fewshot_path", tmp.file(c.shot_file)}});
  }
  const auto job = tmp.path() / "job";
  const auto r = run_worker(job, eval_job(model, tasks));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto metrics = task_metrics(job / "events.jsonl");
  int distinct = 0;  // documents whose choices scored differently: the comparison is not between constants
  for (const auto& c : kCases) {
    INFO(c.name);
    auto cmd = fmt::format("{}lm_eval_ref.py score --model {} --task {} {}", kPython, model.string(), c.adapter,
                           tmp.file(c.file));
    if (c.shots > 0) cmd += fmt::format(" --num-fewshot {} --fewshot-path {}", c.shots, tmp.file(c.shot_file));
    const auto ref_run = test::run_command(cmd + " 2>/dev/null");
    REQUIRE(ref_run.exit_code == 0);
    const auto ref = nlohmann::json::parse(ref_run.output);
    const auto mine = records_by_line(job / "tasks" / (c.name + ".jsonl"));
    REQUIRE(mine.size() == ref["docs"].size());
    for (const auto& doc : ref["docs"]) {
      const auto& m = mine.at(doc["line"].get<int64_t>());
      REQUIRE(m["lls"].size() == doc["lls"].size());
      for (size_t i = 0; i < doc["lls"].size(); ++i)
        CHECK(m["lls"][i].get<double>() == Approx(doc["lls"][i].get<double>()).margin(2e-4));
      CHECK(m["is_greedy"] == doc["is_greedy"]);
      if (!doc["pred"].is_null()) CHECK(m["pred"] == doc["pred"]);
      distinct += doc["lls"].size() > 1 && doc["lls"][0] != doc["lls"][1];
    }
    for (const auto& [key, value] : ref["metrics"].items()) {
      INFO(key);
      REQUIRE(metrics.at(c.name).contains(key));
      if (value.is_number()) CHECK(metrics.at(c.name)[key].get<double>() == Approx(value.get<double>()).epsilon(1e-4));
    }
  }
  CHECK(distinct >= 10);
}

TEST_CASE("eval: bad task files and task settings are refused by file, line and field, exit 2", "[eval]") {
  test::TempDir tmp("eval-bad");
  const auto model = tmp.path() / "model";
  write_model(model, 64);
  const std::string good = R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 0})";
  const struct {
    std::string doc, expected;
  } files[] = {
      {R"({"goal": "g", "sol1": "a", "label": 0})", ":2: sol2: missing"},
      {R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 2})", ":2: label: gold 2 is out of range: 2 choices"},
      {R"({"goal": "g", "sol1": "", "sol2": "b", "label": 0})", ":2: sol1: is empty"},
      {R"({"goal": "g", "sol1": "a", "sol2": "b", "label": "one"})", ":2: label: must be an integer, got \"one\""},
      {R"(["goal"])", ":2: (document): not a JSON object"},
  };
  for (const auto& f : files) {
    INFO(f.expected);
    test::spit(tmp.file("bad.jsonl"), good + "\n" + f.doc + "\n");
    const auto r =
        run_worker(tmp.path() / "job", eval_job(model, {{"piqa", {{"path", tmp.file("bad.jsonl")}}}}), "validate");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("tasks.piqa.path: " + tmp.file("bad.jsonl") + f.expected) != std::string::npos);
  }
  const struct {
    nlohmann::json tasks;
    std::string expected;
  } specs[] = {
      {{{"sciq", {{"path", tmp.file("bad.jsonl")}}}}, "tasks.sciq: 'sciq' is no task adapter"},
      {{{"piqa", {{"path", tmp.file("bad.jsonl")}, {"lengths", {1024}}}}},
       "tasks.piqa.lengths: the piqa adapter does not read it"},
      {{{"piqa", {{"path", tmp.file("bad.jsonl")}, {"fewshot_path", tmp.file("bad.jsonl")}}}},
       "tasks.piqa.num_fewshot: fewshot_path is set but num_fewshot is 0"},
      {{{"mmlu", {{"path", tmp.file("bad.jsonl")}, {"num_fewshot", 5}, {"fewshot_path", "x"}, {"fewshot_seed", 3}}}},
       "tasks.mmlu.fewshot_seed: the mmlu adapter takes the first examples"},
      {{{"passkey", {{"depths", {50}}}}}, "tasks.passkey.lengths: passkey needs its prompt lengths"},
  };
  for (const auto& s : specs) {
    INFO(s.expected);
    const auto r = run_worker(tmp.path() / "job2", eval_job(model, s.tasks), "validate");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(s.expected) != std::string::npos);
  }
}

TEST_CASE("eval: a passkey prompt has the length asked for and its key at the stated depth", "[eval]") {
  const ByteTokenizer tok;
  const auto filler = passkey_filler(tok, "");
  for (int64_t length : {300, 1000}) {
    for (int64_t depth : {0, 25, 50, 100}) {
      const auto p = passkey_prompt(tok, filler, length, depth, 31337, 7);
      CHECK(static_cast<int64_t>(p.ids.size()) == length);
      const double placed = static_cast<double>(p.key_at - p.filler_from) / static_cast<double>(p.filler_tokens);
      CHECK(placed == Approx(static_cast<double>(depth) / 100.0).margin(1.0 / static_cast<double>(p.filler_tokens)));
      const std::vector<int32_t> ids(p.ids.begin(), p.ids.end());
      const auto text = tok.decode(ids);
      const auto key_sentence = "\nThe pass key is 31337. Remember it. 31337 is the pass key.\n";
      CHECK(text.find(key_sentence) == static_cast<size_t>(p.key_at));  // bytes = tokens for the byte tokenizer
      CHECK(text.rfind("What is the pass key? The pass key is") == text.size() - 37);
      for (int64_t i = 0; i < p.key_at - p.filler_from; ++i)  // the filler runs on from the offset asked for
        REQUIRE(p.ids[static_cast<size_t>(p.filler_from + i)] ==
                filler[static_cast<size_t>((7 + i) % static_cast<int64_t>(filler.size()))]);
    }
  }
  CHECK_THROWS_WITH(passkey_prompt(tok, filler, 100, 50, 1, 0), Catch::Contains("leaves no room for filler"));
  CHECK(passkey_correct(" 31337. Remember", 31337));
  CHECK_FALSE(passkey_correct(" 3133 7", 31337));
  CHECK_FALSE(passkey_correct("no digits", 31337));
}

TEST_CASE("eval: recall extraction and passkey run through the step forms and record every document", "[eval]") {
  test::TempDir tmp("eval-gen");
  const auto model = tmp.path() / "model";
  write_model(model, 256);
  test::spit(
      tmp.file("swde.jsonl"),
      R"({"text": "Title: The Cat. Director: Anna Berg. Year: 1999. A film about a cat.", "key": "Director", "value": "Anna Berg"}
{"text": "Name: Blue Lake Park. City: Springfield. Opened in 1950.", "key": "City", "value": "springfield"}
{"text": "Model: X. Price: 5 dollars.", "key": "Price", "value": "5"}
)");
  const nlohmann::json tasks = {
      {"swde",
       {{"adapter", "recall"}, {"path", tmp.file("swde.jsonl")}, {"context_length", 64}, {"max_new_tokens", 5}}},
      {"passkey",
       {{"lengths", {200}}, {"depths", {0, 100}}, {"trials", 2}, {"max_new_tokens", 4}, {"filler", "repeat"}}}};
  const auto job = tmp.path() / "job";
  const auto r = run_worker(job, eval_job(model, tasks));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto recall = records_by_line(job / "tasks" / "swde.jsonl");
  REQUIRE(recall.size() == 2);  // the one-character value is dropped, as the reference harness drops it
  for (const auto& [line, rec] : recall) {
    auto out = rec["output"].get<std::string>(), value = rec["value"].get<std::string>();
    CHECK(out.find('\n') == std::string::npos);  // generation stops at a newline
    for (auto* s : {&out, &value}) std::transform(s->begin(), s->end(), s->begin(), ::tolower);
    CHECK(rec["contains"] == (out.find(value) != std::string::npos));
  }
  std::ifstream in(job / "tasks" / "passkey.jsonl");
  int prompts = 0;
  for (std::string line; std::getline(in, line); ++prompts) {
    const auto rec = nlohmann::json::parse(line);
    CHECK(rec["key"].get<int64_t>() >= 1);
    CHECK(rec["key"].get<int64_t>() <= 50000);
    CHECK(rec["length"] == 200);
  }
  CHECK(prompts == 4);
  const auto metrics = task_metrics(job / "events.jsonl");
  CHECK(metrics.at("passkey").contains("acc.L200.d100"));
  CHECK(metrics.at("swde")["docs"] == 2.0);
  // Each event says whose scoring it repeats: the adapter's own, not lm-eval's for every task.
  const auto events = task_events(job / "events.jsonl");
  CHECK_THAT(events.at("passkey")["semantics"].get<std::string>(), Catch::StartsWith("landmark-attention"));
  CHECK_THAT(events.at("swde")["semantics"].get<std::string>(), Catch::Contains("Arora et al. 2024"));
}

// lm-eval's HellaSwag capitalises ctx_b with Python's str.capitalize: the first character in titlecase and the rest
// in lowercase, by Unicode's full mappings. Checked against Python itself on strings whose first or later letters
// are not ASCII.
TEST_CASE("eval: HellaSwag's capitalize is Python's str.capitalize on non-ASCII text", "[eval]") {
  const std::vector<std::string> samples = {"über alles",
                                            "the MAN",
                                            "ÉCOLE normale",
                                            "ǆemal ǅ",
                                            "ßtraße",
                                            "ﬁsh AND ﬂOUR",
                                            "ΑΣ ΟΔΟΣ. ΣΑΣ",
                                            "σΑΣ",
                                            "İSTANBUL",
                                            "ıi",
                                            "ŉ apostrophe",
                                            "😀 ABC",
                                            "\"QUOTED\" Text",
                                            "ǰ",
                                            "",
                                            "a",
                                            "ΐ",
                                            "123 ÅNGSTRÖM"};
  nlohmann::json in = samples;
  test::TempDir tmp("capitalize");
  test::spit(tmp.file("in.json"), in.dump());
  const auto py = test::run_command(
      "/usr/bin/python3 -c 'import json,sys; print(json.dumps([s.capitalize() for s in "
      "json.load(open(sys.argv[1]))]))' " +
      tmp.file("in.json"));
  REQUIRE(py.exit_code == 0);
  const auto expected = nlohmann::json::parse(py.output).get<std::vector<std::string>>();
  REQUIRE(expected.size() == samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    INFO(samples[i]);
    CHECK(tasks::capitalize(samples[i]) == expected[i]);
  }
  CHECK(tasks::capitalize("über alles") == "Über alles");
}

namespace {

// An MQAR job tested at two points taken in turn, (16, 2) and (32, 8), two batches of 6 each.
nlohmann::json mqar_job() {
  return nlohmann::json::parse(R"({
    "seed": 3, "threads": 1,
    "data": {"source": "mqar", "mqar": {"vocab": 64, "seq_len": 32, "pairs": 4, "test_points": [[16, 2], [32, 8]]}},
    "model": {"vocab": 64, "d_model": 32, "n_layers": 2, "n_heads": 2, "head_dim": 16, "context": 32, "dropout": 0.0},
    "optim": {"lr": 3e-3, "warmup_steps": 3},
    "train": {"steps": 40, "batch_size": 6, "log_every": 10},
    "eval": {"every": 20, "mqar_batches": 4}
  })");
}

double test_accuracy(const fs::path& events) {
  std::ifstream in(events);
  for (std::string line; std::getline(in, line);)
    if (const auto j = nlohmann::json::parse(line); j["type"] == "eval" && j["split"] == "test")
      return j["accuracy"].get<double>();
  FAIL("no test evaluation in " << events);
  return 0;
}

}  // namespace

// The mqar task re-scores a finished MQAR model on its test batches: its pooled accuracy must be the training job's
// recorded test accuracy (the same seeds, sizes and order), and its per-point and per-sequence figures what its
// per-sequence records add up to.
TEST_CASE("eval: the mqar task breaks a training job's test accuracy down by point and by sequence", "[eval]") {
  test::TempDir tmp("eval-mqar");
  auto train = mqar_job();
  REQUIRE(run_worker(tmp.path() / "train", train).exit_code == 0);
  auto job = train;
  job["kind"] = "eval";
  job.erase("optim"), job.erase("model");
  job["train"] = {{"batch_size", 6}};
  job["eval"] = {{"mqar_batches", 4}};
  job["init_checkpoint"] = (tmp.path() / "train" / "best.safetensors").string();
  job["tasks"] = {{"mqar", nlohmann::json::object()}};
  const auto r = run_worker(tmp.path() / "eval", job);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto event = task_events(tmp.path() / "eval" / "events.jsonl").at("mqar");
  const auto& metrics = event["metrics"];
  CHECK_THAT(event["semantics"].get<std::string>(), Catch::StartsWith("fwlab's MQAR test batches"));
  CHECK(metrics["acc"].get<double>() == test_accuracy(tmp.path() / "train" / "events.jsonl"));
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> points;  // (L, n) -> (right, queries)
  double per_sequence = 0;
  int64_t sequences = 0, right = 0, queries = 0;
  std::ifstream in(tmp.path() / "eval" / "tasks" / "mqar.jsonl");
  for (std::string line; std::getline(in, line); ++sequences) {
    const auto rec = nlohmann::json::parse(line);
    const auto batch = rec["batch"].get<int64_t>(), L = rec["length"].get<int64_t>(), n = rec["pairs"].get<int64_t>();
    CHECK(sequences / 6 == batch);
    CHECK(L == (batch % 2 == 0 ? 16 : 32));  // the points in turn
    CHECK(rec["queries"] == n);              // every key is asked once
    auto& p = points[{L, n}];
    p.first += rec["correct"].get<int64_t>(), p.second += n;
    right += rec["correct"].get<int64_t>(), queries += n;
    per_sequence += rec["correct"].get<double>() / static_cast<double>(n);
  }
  CHECK(sequences == 4 * 6);
  CHECK(queries == 2 * 6 * (2 + 8));
  CHECK(metrics["acc"].get<double>() == Approx(static_cast<double>(right) / static_cast<double>(queries)));
  CHECK(metrics["seq_acc"].get<double>() == Approx(per_sequence / 24.0));
  for (const auto& [point, n] : points)
    CHECK(metrics[fmt::format("acc.L{}.n{}", point.first, point.second)].get<double>() ==
          Approx(static_cast<double>(n.first) / static_cast<double>(n.second)));
  CHECK(points.size() == 2);
}

TEST_CASE("eval: the mqar task and text tasks are refused on the other kind of data, exit 2", "[eval]") {
  test::TempDir tmp("eval-mqar-bad");
  auto job = mqar_job();
  job["kind"] = "eval";
  job["init_checkpoint"] = tmp.file("none.safetensors");
  const struct {
    nlohmann::json data, tasks;
    std::string expected;
  } cases[] = {
      {{{"source", "brown"}},
       {{"mqar", nlohmann::json::object()}},
       "tasks.mqar: the mqar adapter scores the job's own"},
      {job["data"], {{"mqar", {{"path", "x.jsonl"}}}}, "tasks.mqar.path: the mqar adapter does not read it"},
      {job["data"], {{"lambada", {{"path", "x.jsonl"}}}}, "tasks.lambada: the lambada adapter scores text"},
  };
  for (const auto& c : cases) {
    INFO(c.expected);
    job["data"] = c.data, job["tasks"] = c.tasks;
    const auto r = run_worker(tmp.path() / "job", job, "validate");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c.expected) != std::string::npos);
  }
}
