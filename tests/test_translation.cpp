// Machine translation's torch-free parts: corpus BLEU both ways against an independent Python implementation
// (tests/python/bleu_ref.py, written from Papineni et al. 2002 and sacreBLEU's documented defaults, not from
// fwlab's code); the parallel corpus and its checks; the FreeDict extraction; the joint SentencePiece vocabulary.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <random>
#include <sstream>

#include "contract/evaluation/bleu.h"
#include "contract/formats/parallel_corpus.h"
#include "text/tokenizers/joint_vocabulary.h"
#include "text/tokenizers/sentencepiece_model.h"
#include "tests/test_support.h"
#include "text/tokenizers/tokenizer_check.h"

using namespace fwlab;
namespace fs = std::filesystem;

namespace {

const std::string kBleuRef = "/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/bleu_ref.py";

std::string lines(const std::vector<std::string>& segments) {
  std::string out;
  for (const auto& s : segments) out += s + "\n";
  return out;
}

nlohmann::json reference_bleu(const test::TempDir& dir, const std::string& mode, const std::vector<std::string>& hyps,
                              const std::vector<std::string>& refs) {
  test::spit(dir.file("hyp"), lines(hyps));
  test::spit(dir.file("ref"), lines(refs));
  const auto r = test::run_command(fmt::format("{} {} {} {}", kBleuRef, mode, dir.file("hyp"), dir.file("ref")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

void check_equal(const BleuScore& mine, const nlohmann::json& ref) {
  INFO(ref.dump());
  CHECK(mine.bleu == Approx(ref["bleu"].get<double>()).margin(1e-9));
  CHECK(mine.brevity_penalty == Approx(ref["bp"].get<double>()).margin(1e-12));
  CHECK(mine.sys_len == ref["sys_len"].get<int64_t>());
  CHECK(mine.ref_len == ref["ref_len"].get<int64_t>());
  for (size_t n = 0; n < 4; ++n) {
    CHECK(mine.matches[n] == ref["counts"][n].get<int64_t>());
    CHECK(mine.totals[n] == ref["totals"][n].get<int64_t>());
    CHECK(mine.precisions[n] == Approx(ref["precisions"][n].get<double>()).margin(1e-9));
  }
}

// Segments from a vocabulary that exercises 13a: punctuation, numbers with separators, hyphens after digits,
// entities, quotes, a multi-byte word.
std::vector<std::string> random_segments(std::mt19937& rng, size_t count, double skip) {
  static const std::vector<std::string> words = {"the",  "cat",    "sat",    "on",   "mat",   "a",     "dog",
                                                 "Haus", "Straße", "grün",   "3.5",  "1,000", "10-15", "well-known",
                                                 "U.S.", "end.",   "hello,", "(see", "it)",   "&amp;", "&quot;hi&quot;",
                                                 "x/y",  "e-mail", "$5",     "100%", "it's",  "?",     "!"};
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1), length(0, 12);
  std::bernoulli_distribution drop(skip);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string s;
    const auto n = drop(rng) ? 0 : length(rng);
    for (size_t j = 0; j < n; ++j) s += (j ? " " : "") + words[pick(rng)];
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("BLEU: tokenized and sacreBLEU-13a corpus BLEU equal an independent implementation", "[translation]") {
  test::TempDir dir("bleu");
  std::mt19937 rng(7);
  for (int corpus = 0; corpus < 6; ++corpus) {
    DYNAMIC_SECTION("random corpus " << corpus) {
      auto refs = random_segments(rng, 40, 0.0);
      // Hypotheses: a reference with words dropped or swapped, or unrelated (some empty).
      auto hyps = random_segments(rng, 40, 0.2);
      for (size_t i = 0; i < refs.size(); i += 2) {  // the reference's first words, fewer in the early corpora
        std::istringstream words(refs[i]);
        std::string word, kept;
        for (int w = 0; w < corpus + 3 && words >> word; ++w) kept += (w ? " " : "") + word;
        hyps[i] = kept;
      }
      check_equal(tokenized_bleu(hyps, refs), reference_bleu(dir, "tok", hyps, refs));
      check_equal(sacre_bleu(hyps, refs), reference_bleu(dir, "sacre", hyps, refs));
    }
  }
  struct Case {
    const char* name;
    std::vector<std::string> hyps, refs;
  };
  for (const auto& c : std::vector<Case>{
           {"an empty hypothesis in the corpus", {"", "the cat sat on the mat"}, {"a dog", "the cat sat on the mat"}},
           {"every hypothesis empty", {"", ""}, {"a dog", "the cat"}},
           {"a hypothesis longer than the reference",
            {"the cat sat on the red mat today , yes"},
            {"the cat sat on the mat"}},
           {"no 4-gram match", {"the cat sat down on a mat"}, {"the cat sat on the mat"}},
           {"clipped counts", {"the the the the"}, {"the cat"}},
           {"shorter than 4 tokens", {"the cat"}, {"the cat sat"}},
       }) {
    DYNAMIC_SECTION(c.name) {
      const auto tok = tokenized_bleu(c.hyps, c.refs), sacre = sacre_bleu(c.hyps, c.refs);
      check_equal(tok, reference_bleu(dir, "tok", c.hyps, c.refs));
      check_equal(sacre, reference_bleu(dir, "sacre", c.hyps, c.refs));
      CHECK(sacre.signature == reference_bleu(dir, "sacre", c.hyps, c.refs)["signature"].get<std::string>());
    }
  }
  // Cases whose value is known without either implementation.
  CHECK(tokenized_bleu({"the cat sat on the mat"}, {"the cat sat on the mat"}).bleu == Approx(100.0));
  CHECK(tokenized_bleu({"the cat sat down on a mat"}, {"the cat sat on the mat"}).bleu == 0.0);  // no 4-gram match
  CHECK(tokenized_bleu({"the cat sat on the red mat today , yes"}, {"the cat sat on the mat"}).brevity_penalty == 1.0);
  CHECK(tokenized_bleu({"", ""}, {"a dog", "the cat"}).bleu == 0.0);
  CHECK_THROWS_WITH(tokenized_bleu({"a"}, {"a", "b"}), "BLEU: 1 hypotheses for 2 references");
}

TEST_CASE("BLEU: the 13a tokenizer splits as an independent implementation does", "[translation]") {
  test::TempDir dir("tok13a");
  std::mt19937 rng(11);
  auto segments = random_segments(rng, 200, 0.05);
  for (const std::string extra : {"He said: \"Yes.\"", "3.5 1,000 .5 5. a.b", "10-15 x-y 2--3", "&amp;lt; &lt;b&gt;",
                                  "U.S.A. e.g., i.e.", "Straße, grün. Ünïcödé!", "  spaced   out  ", "a<skipped>b"})
    segments.push_back(extra);
  test::spit(dir.file("in"), lines(segments));
  const auto r = test::run_command(fmt::format("{} tokenize13a < {}", kBleuRef, dir.file("in")));
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> expected;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) expected.push_back(line);
  REQUIRE(expected.size() == segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    INFO(segments[i]);
    CHECK(tokenize_13a(segments[i]) == expected[i]);
  }
  CHECK(tokenize_13a("He said: \"Yes.\"") == "He said : \" Yes . \"");  // by hand from the four rules
  CHECK(tokenize_13a("1,000.5 and 10-15") == "1,000.5 and 10 - 15");
}

TEST_CASE("parallel corpus: line-aligned files read; bad files refused by file and line", "[translation]") {
  test::TempDir dir("parallel");
  const auto write = [&](const std::string& name, const std::string& text) { test::spit(dir.file(name), text); };
  write("train.de", "\xEF\xBB\xBFGuten Morgen\r\nDanke schön\r\n");
  write("train.en", "Good morning\nThank you\n");
  const auto ok = read_parallel(dir.path().string(), "train", "de", "en");
  CHECK(ok.source == std::vector<std::string>{"Guten Morgen", "Danke schön"});
  CHECK(ok.target == std::vector<std::string>{"Good morning", "Thank you"});

  struct Bad {
    std::string de, en, message;
  };
  const auto de = dir.file("valid.de"), en = dir.file("valid.en");
  for (const auto& bad : std::vector<Bad>{
           {"a\nb\nc\n", "x\ny\n",
            fmt::format("{}:3: {} has 3 lines and {} has 2: parallel files are line-aligned", de, de, en)},
           {"a\n", "x\ny\n", fmt::format("{}:2: {} has 1 lines and {} has 2", en, de, en)},
           {"a\n \nc\n", "x\ny\nz\n", fmt::format("{}:2: an empty segment (its other side is not empty)", de)},
           {"a\nb\n", "x\n\n", fmt::format("{}:2: an empty segment (its other side is not empty)", en)},
           {"a\nb\xC3\n", "x\ny\n", fmt::format("{}:2: not valid UTF-8 (byte 2 of the line)", de)},
           {"a\nb\n", "x\n\xED\xA0\x80y\n",
            fmt::format("{}:2: not valid UTF-8 (byte 1 of the line)", en)},  // a surrogate
           {"", "x\n", fmt::format("{}: the file holds no segments", de)},
       }) {
    write("valid.de", bad.de);
    write("valid.en", bad.en);
    CHECK_THROWS_WITH(read_parallel(dir.path().string(), "valid", "de", "en"), Catch::StartsWith(bad.message));
  }
  CHECK_THROWS_WITH(read_parallel(dir.path().string(), "test", "de", "en"),
                    Catch::Contains("test.de: cannot read the file"));
}

TEST_CASE("parallel corpus: the UTF-8 check finds the same first bad byte as Python's strict decoder",
          "[translation]") {
  test::TempDir dir("utf8");
  std::mt19937 rng(5);
  // Random strings from bytes that make every kind of sequence: ASCII, continuations, 2-4 byte leads, invalid leads.
  const std::vector<unsigned char> bytes = {'a',  'b',  'c',  'd',  ' ',  0x80, 0x8F, 0xA0, 0xBF, 0xC0,
                                            0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  std::uniform_int_distribution<size_t> pick(0, bytes.size() - 1), length(1, 6);
  std::vector<std::string> samples;
  for (int i = 0; i < 400; ++i) {
    std::string s;
    for (size_t n = length(rng); n > 0; --n) s += static_cast<char>(bytes[pick(rng)]);
    samples.push_back(s);
  }
  std::string hex;
  for (const auto& s : samples) {
    for (const unsigned char c : s) hex += fmt::format("{:02x}", c);
    hex += "\n";
  }
  test::spit(dir.file("samples"), hex);
  const auto r =
      test::run_command(fmt::format("/usr/bin/python3 -c \"import sys\nfor l in open(sys.argv[1]):\n b = "
                                    "bytes.fromhex(l.strip())\n try: b.decode('utf-8'); print(-1)\n "
                                    "except UnicodeDecodeError as e: print(e.start)\" {}",
                                    dir.file("samples")));
  REQUIRE(r.exit_code == 0);
  std::istringstream in(r.output);
  size_t valid = 0;
  for (const auto& s : samples) {
    long expected = 0;
    in >> expected;
    const auto mine = invalid_utf8_at(s);
    std::string sample_hex;
    for (const unsigned char c : s) sample_hex += fmt::format("{:02x}", c);
    INFO("bytes " << sample_hex);
    CHECK((mine == std::string::npos ? -1L : static_cast<long>(mine)) == expected);
    valid += expected == -1;
  }
  CHECK(valid > 20);  // the samples hold valid strings too, not only broken ones
}

TEST_CASE("FreeDict corpus: every distinct example pair once, split by its German side, the same bytes on a second run",
          "[translation]") {
  test::TempDir dir("freedict");
  // A dictd database in miniature: a header, entries, examples (one repeated under two headwords, one German line
  // with two translations), lines that only look like examples.
  std::string dict = "00-database-info\nGerman - English Ding/FreeDict dictionary\n\n";
  for (int i = 0; i < 60; ++i)
    dict += fmt::format(
        "Wort{} /v/ <n>\n word{} <n>\n      \"das Wort {}\"  - the word {}\n      \"sehr  gut\"  - very good\n", i, i,
        i, i);
  dict +=
      "Fall <n>\n case <n>\n      \"für den Fall\"  - in case\n      \"für den Fall\"  - in the event\n   \"nicht "
      "eingerückt genug\" - no\n";
  test::spit(dir.file("dict"), dict);
  REQUIRE(test::run_command(fmt::format("gzip -c {} > {}", dir.file("dict"), dir.file("dict.dz"))).exit_code == 0);
  const auto script = fmt::format("python3 {}/scripts/freedict_corpus.py {} ", FWLAB_SOURCE_DIR, dir.file("dict.dz"));
  REQUIRE(test::run_command(script + dir.file("a")).exit_code == 0);
  REQUIRE(test::run_command(script + dir.file("b")).exit_code == 0);
  std::map<std::string, std::string> pairs, split_of;
  for (const std::string split : {"train", "valid", "test"}) {
    const auto path = [&](const char* dir_name, const char* lang) {
      return fmt::format("{}/{}.{}", dir.file(dir_name), split, lang);
    };
    CHECK(test::slurp(path("a", "de")) == test::slurp(path("b", "de")));
    CHECK(test::slurp(path("a", "en")) == test::slurp(path("b", "en")));
    std::istringstream de(test::slurp(path("a", "de"))), en(test::slurp(path("a", "en")));
    for (std::string d, e; std::getline(de, d) && std::getline(en, e);) {
      CHECK(pairs.count(d + "\t" + e) == 0);
      pairs[d + "\t" + e] = split;
      if (split_of.count(d)) CHECK(split_of[d] == split);  // a German line never straddles two splits
      split_of[d] = split;
    }
  }
  CHECK(pairs.size() == 60 + 1 + 2);  // "das Wort i", "sehr gut" once (whitespace collapsed), "für den Fall" twice
  CHECK(pairs.count("sehr gut\tvery good") == 1);
  CHECK(pairs.count("für den Fall\tin the event") == 1);
}

TEST_CASE(
    "joint vocabulary: one SentencePiece BPE model from both sides, cached beside the corpus, read as spm_encode reads "
    "it",
    "[translation]") {
  test::TempDir dir("vocab");
  std::string de, en;
  const std::vector<std::pair<std::string, std::string>> pairs = {{"das Haus ist groß", "the house is big"},
                                                                  {"der Hund schläft", "the dog sleeps"},
                                                                  {"ich lese ein Buch", "I am reading a book"},
                                                                  {"die Straße ist nass", "the street is wet"}};
  for (int i = 0; i < 50; ++i)
    for (const auto& [d, e] : pairs) de += fmt::format("{} {}\n", d, i), en += fmt::format("{} {}\n", e, i);
  test::spit(dir.file("train.de"), de);
  test::spit(dir.file("train.en"), en);
  const auto path = joint_vocabulary(dir.path().string(), "de", "en", 120);
  CHECK(path == dir.file("spm_joint_de-en_bpe120.model"));
  REQUIRE(std::filesystem::exists(path));
  CHECK(std::filesystem::exists(dir.file("spm_joint_de-en_bpe120.vocab")));
  const auto written = std::filesystem::last_write_time(path);
  CHECK(joint_vocabulary(dir.path().string(), "de", "en", 120) == path);  // cached: not learnt again
  CHECK(std::filesystem::last_write_time(path) == written);

  SentencePieceModel model(path.c_str());
  CHECK(model.piece_size() == 120);
  CHECK(model.bos_id() == 2);
  CHECK(model.eos_id() == 3);
  CHECK(model.is_unknown(1));
  // Both languages' words are in the one vocabulary: the ids equal Debian's spm_encode with the same model.
  for (const std::string text : {"die Straße ist groß 7", "the dog is reading 42"}) {
    test::spit(dir.file("line"), text + "\n");
    const auto r =
        test::run_command(fmt::format("spm_encode --model={} --output_format=id < {}", path, dir.file("line")));
    REQUIRE(r.exit_code == 0);
    const auto ids = model.encode(text.data(), text.size());
    std::string mine;
    for (size_t i = 0; i < ids.size(); ++i) mine += (i ? " " : "") + std::to_string(ids[i]);
    CHECK(mine + "\n" == r.output);
    const auto back = model.decode(ids);
    CHECK(std::string(back.begin(), back.end()) == text);
  }
  CHECK_THROWS_WITH(
      joint_vocabulary(dir.path().string(), "de", "en", 100000),
      Catch::StartsWith(dir.path().string() +
                        ": cannot learn a joint vocabulary of 100000 pieces from train.de and train.en: "));
  CHECK(!std::filesystem::exists(dir.file("spm_joint_de-en_bpe100000.model")));
}

TEST_CASE(
    "fwlab bleu: both scores of two files as the independent implementation gives them; bad files exit 2 by name and "
    "line",
    "[translation]") {
  test::TempDir dir("bleu_cli");
  std::mt19937 rng(3);
  const auto refs = random_segments(rng, 30, 0.0), hyps = random_segments(rng, 30, 0.1);
  const auto expected_sacre = reference_bleu(dir, "sacre", hyps, refs),
             expected_tok = reference_bleu(dir, "tok", hyps, refs);
  const auto r =
      test::run_command(fmt::format("{} bleu {} {} --format json", FWLAB_BIN, dir.file("hyp"), dir.file("ref")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto got = nlohmann::json::parse(r.output);
  CHECK(got["sacrebleu"]["bleu"].get<double>() == Approx(expected_sacre["bleu"].get<double>()).margin(1e-9));
  CHECK(got["sacrebleu"]["signature"] == expected_sacre["signature"]);
  CHECK(got["tokenized"]["bleu"].get<double>() == Approx(expected_tok["bleu"].get<double>()).margin(1e-9));
  CHECK(got["tokenized"]["sys_len"] == expected_tok["sys_len"]);
  const auto text = test::run_command(fmt::format("{} bleu {} {}", FWLAB_BIN, dir.file("hyp"), dir.file("ref")));
  CHECK_THAT(text.output,
             Catch::StartsWith(fmt::format("BLEU (sacreBLEU, 13a) = {:.2f} ", expected_sacre["bleu"].get<double>())) &&
                 Catch::Contains(fmt::format("tokenized BLEU (whitespace tokens, fairseq) = {:.2f} ",
                                             expected_tok["bleu"].get<double>())));

  test::spit(dir.file("short"), "a\nb\n");
  test::spit(dir.file("bad"), "fine\nbro\xC3ken\n");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {fmt::format("{} {}", dir.file("short"), dir.file("ref")),
            fmt::format("{} has 2 lines and {} has 30", dir.file("short"), dir.file("ref"))},
           {fmt::format("{} {}", dir.file("bad"), dir.file("short")),
            fmt::format("{}:2: not valid UTF-8 (byte 4 of the line)", dir.file("bad"))},
           {fmt::format("{} {}", dir.file("missing"), dir.file("ref")),
            fmt::format("{}: cannot read the file", dir.file("missing"))}}) {
    const auto e = test::run_command(fmt::format("{} bleu {}", FWLAB_BIN, args));
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.output, Catch::Contains(message));
  }
}

namespace {

// A toy De -> En corpus of number words: every sentence is its own translation word by word, so that a tiny model
// learns something in a few steps. Deterministic.
void write_number_corpus(const test::TempDir& dir, int train, int valid, int test) {
  const std::vector<std::pair<std::string, std::string>> words = {
      {"eins", "one"},  {"zwei", "two"},  {"drei", "three"},   {"vier", "four"},
      {"fünf", "five"}, {"sechs", "six"}, {"sieben", "seven"}, {"acht", "eight"}};
  std::mt19937 rng(7);
  auto split = [&](const std::string& name, int n) {
    std::string de, en;
    for (int i = 0; i < n; ++i) {
      const int len = 1 + static_cast<int>(rng() % 4);
      for (int w = 0; w < len; ++w) {
        const auto& [d, e] = words[rng() % words.size()];
        de += (w ? " " : "") + d, en += (w ? " " : "") + e;
      }
      de += "\n", en += "\n";
    }
    test::spit(dir.file(name + ".de"), de);
    test::spit(dir.file(name + ".en"), en);
  };
  split("train", train), split("valid", valid), split("test", test);
}

nlohmann::json tiny_translate_job(const std::string& corpus) {
  return {
      {"kind", "translate"},
      {"seed", 3},
      {"threads", 1},
      {"data", {{"source", "parallel"}, {"path", corpus}, {"src", "de"}, {"tgt", "en"}, {"vocab_size", 40}}},
      {"model",
       {{"vocab", 40},
        {"encoder_layers", 1},
        {"n_layers", 1},
        {"d_model", 32},
        {"n_heads", 2},
        {"head_dim", 16},
        {"d_ff", 64},
        {"context", 32},
        {"dropout", 0.0},
        {"mixer", {{"kind", "fast_weight"}, {"rule", "add"}, {"feature_map", "relu"}, {"norm", "attn"}, {"m", 4}}},
        {"cross", {{"kind", "fast_weight"}, {"rule", "add"}, {"feature_map", "relu"}, {"norm", "attn"}, {"m", 8}}}}},
      {"optim", {{"lr", 3e-3}, {"warmup_steps", 5}}},
      {"train", {{"steps", 60}, {"log_every", 10}}},
      {"eval", {{"every", 20}}},
      {"translate", {{"batch_tokens", 256}, {"average_last", 2}, {"beam", 3}, {"len_penalty", 0.6}}}};
}

std::vector<nlohmann::json> events_of(const std::string& job_dir, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::istringstream in(test::slurp(job_dir + "/events.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (auto j = nlohmann::json::parse(line); j["type"] == type) out.push_back(j);
  return out;
}

}  // namespace

TEST_CASE(
    "translate job: trains a T2R encoder-decoder, averages its last checkpoints, decodes the test split and scores it",
    "[translation]") {
  test::TempDir dir("translate");
  write_number_corpus(dir, 300, 20, 15);
  const auto job = dir.file("job");
  fs::create_directories(job);
  test::spit(job + "/job.json", tiny_translate_job(dir.path().string()).dump());
  const auto r = test::run_command(fmt::format("{} run {}", FWLAB_WORKER, job));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const auto evals = events_of(job, "eval");
  REQUIRE(evals.size() == 3);
  CHECK(evals.back()["step"] == 60);
  CHECK(evals.back()["loss"].get<double>() < evals.front()["loss"].get<double>());
  const auto average = events_of(job, "checkpoint_average");
  REQUIRE(average.size() == 1);
  CHECK(average[0]["checkpoints"] ==
        nlohmann::json::array({job + "/checkpoints/step40.safetensors", job + "/checkpoints/step60.safetensors"}));
  CHECK_FALSE(fs::exists(job + "/checkpoints/step20.safetensors"));  // only the last average_last are kept

  // The hypotheses are the test split's, one per line, and the recorded BLEU is what `fwlab bleu` gives for them.
  CHECK(test::slurp(job + "/translations/test.ref") == test::slurp(dir.file("test.en")));
  const auto hyp = test::slurp(job + "/translations/test.hyp");
  CHECK(std::count(hyp.begin(), hyp.end(), '\n') == 15);
  const auto scored = test::run_command(
      fmt::format("{} bleu {}/translations/test.hyp {}/translations/test.ref --format json", FWLAB_BIN, job, job));
  REQUIRE(scored.exit_code == 0);
  const auto expected = nlohmann::json::parse(scored.output);
  std::map<std::string, double> recorded;
  for (const auto& m : events_of(job, "metric")) recorded[m["key"]] = m["value"].get<double>();
  CHECK(recorded.at("bleu") == Approx(expected["tokenized"]["bleu"].get<double>()));
  CHECK(recorded.at("sacrebleu") == Approx(expected["sacrebleu"]["bleu"].get<double>()));
  const auto translation = events_of(job, "translation");
  REQUIRE(translation.size() == 1);
  CHECK(translation[0]["sentences"] == 15);
  CHECK(translation[0]["sacrebleu"]["signature"].get<std::string>().rfind(
            "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2", 0) == 0);
}

namespace {

// step -> value of every `key` metric (a resumed job may log a step twice: the later one stands).
std::map<int64_t, double> curve_of(const std::string& job, const std::string& key) {
  std::map<int64_t, double> out;
  for (const auto& m : events_of(job, "metric"))
    if (m["key"] == key) out[m["step"].get<int64_t>()] = m["value"].get<double>();
  return out;
}

}  // namespace

TEST_CASE("translate job: killed half-way and resumed, it ends as an uninterrupted run: curve, average, BLEU",
          "[translation]") {
  test::TempDir dir("translate_resume");
  write_number_corpus(dir, 300, 20, 15);
  auto spec = tiny_translate_job(dir.path().string());
  spec["model"]["dropout"] = 0.1;  // the resumed job must draw the same dropout masks: the RNG is in the state
  auto run = [&](const std::string& name, const nlohmann::json& j) {
    const auto job = dir.file(name);
    fs::create_directories(job);
    test::spit(job + "/job.json", j.dump());
    return test::run_command(fmt::format("{} run {}", FWLAB_WORKER, job)).exit_code;
  };
  REQUIRE(run("whole", spec) == 0);
  auto crashing = spec;
  crashing["debug"] = {{"exit_at_step", 45}};  // SIGKILL after step 45; the last resume point is step 40
  const int killed = run("killed", crashing);
  CHECK((killed == -1 || killed == 128 + 9));
  const auto whole = dir.file("whole"), job = dir.file("killed");
  CHECK(fs::exists(job + "/resume.safetensors"));
  CHECK(events_of(job, "end").empty());
  REQUIRE(run("killed", spec) == 0);
  const auto starts = events_of(job, "start");
  REQUIRE(starts.size() == 2);
  CHECK(starts[1]["resumed_from_step"] == 40);
  CHECK_FALSE(fs::exists(job + "/resume.safetensors"));  // an ended job is never resumed
  CHECK(curve_of(job, "train_loss") == curve_of(whole, "train_loss"));
  CHECK(curve_of(job, "train_loss").size() == 6);
  CHECK(events_of(job, "eval").back()["loss"] == events_of(whole, "eval").back()["loss"]);
  CHECK(test::slurp(job + "/averaged.safetensors") == test::slurp(whole + "/averaged.safetensors"));
  CHECK(test::slurp(job + "/translations/test.hyp") == test::slurp(whole + "/translations/test.hyp"));
  CHECK(curve_of(job, "bleu") == curve_of(whole, "bleu"));
  CHECK(curve_of(job, "sacrebleu") == curve_of(whole, "sacrebleu"));
}

TEST_CASE("translate job: a damaged vocabulary (data.vocab, or a joint one learned earlier) is refused at validate",
          "[translation]") {
  test::TempDir dir("translate_vocab");
  write_number_corpus(dir, 30, 5, 5);
  std::mt19937 rng(11);
  std::string bytes(1024, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng() & 0xff);
  test::spit(dir.file("user.model"), bytes);
  test::spit(dir.file("spm_joint_de-en_bpe40.model"), bytes.substr(0, 100));  // a learned one, cut short
  auto own = tiny_translate_job(dir.path().string());
  own["data"].erase("vocab_size");
  own["data"]["vocab"] = "user.model";
  const auto learned = tiny_translate_job(dir.path().string());
  for (const auto& [j, key, file] : std::vector<std::tuple<nlohmann::json, std::string, std::string>>{
           {own, "data.vocab", dir.file("user.model")},
           {learned, "data.vocab_size", dir.file("spm_joint_de-en_bpe40.model")}}) {
    const auto problems = tokenizer_problems(parse_job_spec(j, "/repo"));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].field() == key);
    CHECK_THAT(problems[0].what(), Catch::Contains(file + ": not a SentencePiece model"));
    const auto job = dir.file("job-" + key);
    fs::create_directories(job);
    test::spit(job + "/job.json", j.dump());
    const auto r = test::run_command(fmt::format("{} validate {}", FWLAB_WORKER, job));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(key + ": " + file));
  }
}

TEST_CASE("translate job: bad parallel files and a missing vocabulary stop the sweep before any job, by file and line",
          "[translation]") {
  test::TempDir dir("translate_bad");
  write_number_corpus(dir, 20, 5, 5);
  const auto file = dir.file("mt.toml"), db = dir.file("fwlab.db");
  const auto experiment = [&](const std::string& vocab) {
    test::spit(
        file,
        fmt::format(
            "[experiment]\nname = \"mt\"\n[defaults]\nkind = \"translate\"\n[defaults.data]\nsource = \"parallel\"\n"
            "path = \"{}\"\nsrc = \"de\"\ntgt = \"en\"\n{}\n[defaults.model]\nvocab = 40\nencoder_layers = 1\nn_layers "
            "= 1\n"
            "d_model = 32\nn_heads = 2\nhead_dim = 16\ncontext = 32\n[stage.s]\nmixer = \"softmax\"\nsteps = 2\n",
            dir.path().string(), vocab));
  };
  const auto sweep = [&] {
    return test::run_command(fmt::format("{} sweep {} --db {} --runs {}", FWLAB_BIN, file, db, dir.file("runs")));
  };
  const auto valid_de = dir.file("valid.de"), test_en = dir.file("test.en");
  const auto good_valid = test::slurp(valid_de), good_test = test::slurp(test_en);
  struct Case {
    std::function<void()> damage;
    std::string vocab, message;
  };
  for (const auto& c : std::vector<Case>{
           {[&] { test::spit(valid_de, good_valid + "noch eine Zeile\n"); }, "vocab_size = 40",
            fmt::format("{}:6: {} has 6 lines and {} has 5", valid_de, valid_de, dir.file("valid.en"))},
           {[&] { test::spit(test_en, ""); }, "vocab_size = 40",
            fmt::format("{}: the file holds no segments", test_en)},
           {[&] { test::spit(test_en, "one\ntw\xFFo\nthree\nfour\nfive\n"); }, "vocab_size = 40",
            fmt::format("{}:2: not valid UTF-8 (byte 3 of the line)", test_en)},
           {[] {}, "vocab = \"joint.model\"", fmt::format("data.vocab: {} does not exist", dir.file("joint.model"))},
       }) {
    test::spit(valid_de, good_valid), test::spit(test_en, good_test);
    c.damage();
    experiment(c.vocab);
    const auto r = sweep();
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.message));
    CHECK_FALSE(fs::exists(dir.file("runs")));  // no job started
  }
}
