// Hugging Face tokenizers (text/tokenizers/hf_tokenizer.h). Every tokenizer file is made here: tokenizer.json
// directories by the independent reference tests/python/hf_tokenizer.py (written from the tokenizers library's sources,
// not from fwlab's code) or by hand, SentencePiece models by spm_train. Ids must equal the reference's / spm_encode's
// on each string.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "contract/job/inputs.h"
#include "contract/job/job_spec.h"
#include "tests/test_support.h"
#include "text/corpora/dataset.h"
#include "text/tokenizers/hf_tokenizer.h"
#include "text/tokenizers/hf_tokenizer_json.h"
#include "text/tokenizers/sentencepiece_tokenizer.h"
#include "text/tokenizers/tokenizer_check.h"

using namespace fwlab;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kReference = "/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/hf_tokenizer.py";

// Unicode (accents, CJK, emoji, combining marks NFC composes), runs of spaces / newlines, tabs, long numbers,
// contractions in both cases (Llama 3's (?i:...)), White_Space edge cases (\v, U+0085 are spaces to Oniguruma's
// \s, U+001C is not), special tokens inside text, the empty string.
const std::vector<std::string> kStrings = {"",
                                           " ",
                                           "  ",
                                           "\n",
                                           "\n\n\n",
                                           "\t",
                                           "\t\tindented",
                                           "a\r\nb",
                                           "Hello, world!",
                                           "I'm",
                                           "I'M",
                                           "you're",
                                           "YOU'RE",
                                           "we've",
                                           "WE'VE",
                                           "they'll",
                                           "THEY'LL",
                                           "she'd",
                                           "SHE'D",
                                           "it's",
                                           "IT'S",
                                           "don't",
                                           "Don'T",
                                           "'s 't 're 've 'm 'll 'd",
                                           "1",
                                           "12",
                                           "123",
                                           "1234",
                                           "1234567",
                                           "98765432109876543210",
                                           "3.14159",
                                           "1,000,000",
                                           "x=42;",
                                           "你好，世界",
                                           "日本語のテキスト",
                                           "한국어 텍스트",
                                           "😀👍🏽🇫🇷",
                                           "👨‍👩‍👧",
                                           "café naïve Ωμέγα",
                                           "e\u0301 a\u0308 n\u0303",
                                           "Straße",
                                           "Привет мир",
                                           "مرحبا",
                                           "नमस्ते",
                                           "   leading",
                                           "trailing   ",
                                           "mixed \t \n whitespace \r\n end",
                                           "\u00a0nbsp",
                                           "\x01\x1c control",
                                           "a\x1c b",
                                           "v\x0bt\x0b\x0bx",
                                           "nel\u0085line\u2028sep",
                                           "zero\u200bwidth",
                                           "x   \n\n   y",
                                           "  \n  ",
                                           "tabs\tand\nnewlines\n\n  indented",
                                           "    def f(x):\n        return x\n",
                                           "a<|eot_id|>b",
                                           "<|begin_of_text|>hi<|end_of_text|>",
                                           "<|endoftext|>x<|im_start|>user\nhi<|im_end|>",
                                           " <|im_end|> ",
                                           "<|endoftext|><|endoftext|>"};

// Random strings over a pool that mixes all of the above (a fixed seed: the same strings every run).
std::vector<std::string> random_strings(size_t count) {
  const std::vector<std::string> pool = {
      "a",    "b",      "c",      "X",  "Y",  "Z",        " ",      " ",          "'",          "’",
      "\"",   "-",      ".",      ",",  "!",  "?",        "0",      "1",          "7",          "9",
      "\t",   "\n",     "\r",     "é",  "ü",  "ñ",        "ß",      "Å",          "Ω",          "ж",
      "中",   "文",     "日",     "한", "😀",  "👍🏽", "\u0301", "\u0308",     "\u200d",     "\u00a0",
      "\x1c", "\u0085", "\u3000", "'s", "'S", "'t",       "'LL",    "<|eot_id|>", "<|im_end|>", "<|endoftext|>",
      "12345"};
  std::mt19937 rng(1234);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string s;
    for (size_t n = 1 + rng() % 40; n > 0; --n) s += pool[rng() % pool.size()];
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> all_strings() {
  auto out = kStrings;
  const auto extra = random_strings(400);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// The reference's `make DIR --style STYLE [flags]`.
void make_reference(const fs::path& dir, const std::string& style, const std::string& flags = "") {
  const auto r = test::run_command(fmt::format("{} make {} --style {} {}", kReference, dir.string(), style, flags));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

// The reference's `encode` / `decode` of `inputs` (one JSON value per line), its output lines as JSON.
std::vector<json> reference(const std::string& verb, const fs::path& dir, const std::vector<json>& inputs,
                            const std::string& flags = "") {
  const auto in = dir.string() + ".in.jsonl", out = dir.string() + ".out.jsonl";
  std::string lines;
  for (const auto& v : inputs) lines += v.dump() + "\n";
  test::spit(in, lines);
  const auto r =
      test::run_command(fmt::format("{} {} {} {} < {} > {}", kReference, verb, dir.string(), flags, in, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<json> result;
  std::istringstream text(test::slurp(out));
  for (std::string line; std::getline(text, line);) result.push_back(json::parse(line));
  REQUIRE(result.size() == inputs.size());
  return result;
}

HfJsonTokenizer json_tokenizer(const fs::path& dir) {
  const auto config = dir / "tokenizer_config.json";
  return HfJsonTokenizer((dir / "tokenizer.json").string(), fs::exists(config) ? config.string() : "",
                         "hf:" + dir.string());
}

// Ids of every string against the reference's (with special tokens as the files say), and decoding against the
// reference's decode of the same ids. Returns the number of strings checked.
size_t compare_with_reference(const fs::path& dir, const std::vector<std::string>& strings) {
  const auto tok = json_tokenizer(dir);
  std::vector<json> inputs(strings.begin(), strings.end());
  const auto expected = reference("encode", dir, inputs);
  std::vector<json> ours;
  size_t mismatched = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const auto ids = tok.encode(strings[i]);
    ours.emplace_back(ids);
    if (ids != expected[i].get<std::vector<int32_t>>() && ++mismatched <= 3)
      FAIL_CHECK(
          fmt::format("{}: ours {} reference {}", json(strings[i]).dump(), json(ids).dump(), expected[i].dump()));
  }
  CHECK(mismatched == 0);
  const auto decoded = reference("decode", dir, ours);
  for (size_t i = 0; i < strings.size(); ++i)
    CHECK(tok.decode(ours[i].get<std::vector<int32_t>>()) == decoded[i].get<std::string>());
  return strings.size();
}

}  // namespace

TEST_CASE("hf tokenizer.json: Llama 3, Qwen2 and GPT-2 layouts give the reference's ids and text", "[hf_tokenizer]") {
  test::TempDir tmp("hftok");
  const auto strings = all_strings();
  for (const std::string style : {"llama3", "qwen2", "gpt2"})
    for (const std::string merges : {"strings", "pairs"}) {
      SECTION(style + " merges as " + merges) {
        const auto dir = tmp.path() / (style + "-" + merges);
        make_reference(dir, style, "--merges-format " + merges);
        CHECK(compare_with_reference(dir, strings) == strings.size());
      }
    }
}

TEST_CASE(
    "hf tokenizer.json: Llama 2 (legacy Prepend + Replace) and Mistral (Metaspace) layouts with byte fallback give the "
    "reference's ids and text",
    "[hf_tokenizer]") {
  test::TempDir tmp("hftok-spm");
  auto strings = all_strings();
  // Metaspace's prepend_scheme "first": no "▁" after a special token at the start or in the middle.
  for (const std::string s :
       {"<s>Hello", "Hello</s>world", " Hey", "Hey", "  two  spaces  ", "▁already", "a▁b c", "<unk>x"})
    strings.push_back(s);
  for (const std::string style : {"llama2", "mistral"})
    for (const std::string decoder : {"", "--metaspace-decoder"}) {
      if (style == "llama2" && !decoder.empty()) continue;
      SECTION(style + (decoder.empty() ? "" : " with a Metaspace decoder")) {
        const auto dir = tmp.path() / style;
        make_reference(dir, style, decoder);
        CHECK(compare_with_reference(dir, strings) == strings.size());
        // Byte fallback is exercised: some string falls back to <0xXX> tokens.
        const auto tok = json_tokenizer(dir);
        const auto ids = tok.encode("😀");
        REQUIRE(tok.token_to_id("<0xF0>"));
        CHECK(std::find(ids.begin(), ids.end(), *tok.token_to_id("<0xF0>")) != ids.end());
        // With a tokenizer.model beside it, tokenizer.json is what a directory's tokenizer reads (as transformers'
        // fast tokenizers do): the same ids.
        test::spit((dir / "tokenizer.model").string(), "not a SentencePiece model");
        CHECK(load_hf_tokenizer(dir.string())->encode("Hello world") == tok.encode("Hello world"));
      }
    }
}

TEST_CASE("hf tokenizer.json: decoding inverts encoding; vocabulary size and BOS as the files say", "[hf_tokenizer]") {
  test::TempDir tmp("hfround");
  make_reference(tmp.path() / "llama3", "llama3");
  make_reference(tmp.path() / "qwen2", "qwen2");
  const auto llama = json_tokenizer(tmp.path() / "llama3");
  for (const auto& s : all_strings()) CHECK(llama.decode(llama.encode(s, false)) == s);  // no normalizer: bytes back
  const auto tj = json::parse(test::slurp((tmp.path() / "llama3" / "tokenizer.json").string()));
  CHECK(llama.vocab_size() == static_cast<int64_t>(tj["model"]["vocab"].size() + tj["added_tokens"].size()));
  const auto bos = llama.token_to_id("<|begin_of_text|>");
  REQUIRE(bos);
  CHECK(llama.encode("") == std::vector<int32_t>{*bos});  // Llama 3's TemplateProcessing
  auto with_bos = llama.encode("Hi", false);
  with_bos.insert(with_bos.begin(), *bos);
  CHECK(llama.encode("Hi") == with_bos);
  const auto qwen = json_tokenizer(tmp.path() / "qwen2");
  CHECK(qwen.encode("Hi") == qwen.encode("Hi", false));    // Qwen2: no BOS
  CHECK(qwen.encode("e\u0301") == qwen.encode("\u00e9"));  // its NFC normalizer
  CHECK(llama.encode("e\u0301") != llama.encode("\u00e9"));
  CHECK(llama.decode(llama.encode("broken \xe2\x80 utf8", false)) ==
        "broken \xef\xbf\xbd utf8");  // U+FFFD for bad bytes
}

TEST_CASE("hf tokenizer.json: tokenizer_config.json's add_bos_token / add_eos_token rebuild the template",
          "[hf_tokenizer]") {
  test::TempDir tmp("hfconfig");
  const auto strings = std::vector<std::string>{"", "Hi there", "a<|eot_id|>b", "1234567"};
  make_reference(tmp.path() / "llama3", "llama3");
  make_reference(tmp.path() / "qwen2", "qwen2");
  auto edit = [&](const std::string& style, const json& changes) {
    const auto path = (tmp.path() / style / "tokenizer_config.json").string();
    auto config = json::parse(test::slurp(path));
    config.update(changes);
    test::spit(path, config.dump());
    return compare_with_reference(tmp.path() / style, strings);
  };
  CHECK(edit("llama3", {{"add_bos_token", false}}) == strings.size());
  CHECK(edit("llama3", {{"add_bos_token", true}, {"add_eos_token", true}}) == strings.size());
  CHECK(edit("qwen2", {{"add_bos_token", true}}) == strings.size());  // bos_token null: nothing added
  CHECK(edit("qwen2", {{"add_bos_token", true}, {"bos_token", "<|endoftext|>"}}) == strings.size());
  const auto qwen = json_tokenizer(tmp.path() / "qwen2");
  CHECK(qwen.encode("Hi").front() == *qwen.token_to_id("<|endoftext|>"));
}

namespace {

// The reference's hand-written tiny byte-level tokenizer (hf_tokenizer.py _tiny_json): 9 symbols, 10 merges,
// <|eot|> and <s> (BOS by template).
json tiny_json(const json& extra_added = json::array()) {
  const std::vector<std::string> base = {"h", "e", "l", "o", "\u0120", "w", "r", "d", "!"};
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"l", "l"}, {"h", "e"},        {"he", "ll"},       {"hell", "o"},       {"\u0120", "w"},
      {"o", "r"}, {"\u0120w", "or"}, {"\u0120wor", "l"}, {"\u0120worl", "d"}, {"l", "o"}};
  json vocab = json::object(), merge_lines = json::array();
  int id = 0;
  for (const auto& b : base) vocab[b] = id++;
  for (const auto& m : merges) {
    vocab[m.first + m.second] = id++;
    merge_lines.push_back(m.first + " " + m.second);
  }
  auto added = json::array({{{"id", 19}, {"content", "<|eot|>"}, {"special", true}, {"normalized", false}},
                            {{"id", 20}, {"content", "<s>"}, {"special", true}, {"normalized", false}}});
  for (const auto& a : extra_added) added.push_back(a);
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {20}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_lines}}}};
}

// A character-level BPE without pre-tokenizer (hf_tokenizer.py _mini_json), for the model's options.
json mini_json(const json& vocab, const json& merges, const json& model_options = json::object(),
               const json& normalizer = nullptr, const json& added = json::array()) {
  json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  model.update(model_options);
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", normalizer},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", model}};
}

fs::path write_tokenizer(const fs::path& dir, const json& tokenizer_json) {
  fs::create_directories(dir);
  test::spit((dir / "tokenizer.json").string(), tokenizer_json.dump(1));
  return dir;
}

json added_token(int id, const std::string& content, bool special, const json& options = json::object()) {
  json t = {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", false}, {"special", special}};
  t.update(options);
  return t;
}

}  // namespace

TEST_CASE("hf tokenizer.json: added tokens' lstrip, rstrip, single_word, normalized and leftmost-longest match",
          "[hf_tokenizer]") {
  test::TempDir tmp("hfadded");
  const auto extra = json::array({added_token(21, "[M]", false, {{"lstrip", true}, {"rstrip", true}}),
                                  added_token(22, "wor", false, {{"single_word", true}}), added_token(23, "<t>", true),
                                  added_token(24, "<t><t>", true)});
  const std::vector<std::string> strings = {
      "hello [M] world", "wor",          "world", " wor ", "hello wor!",  "<t><t><t>",       "hello<|eot|>hello",
      " hello",          "hello  world", "hex",   "",      "[M][M]  [M]", "\u3000[M]\u3000x"};
  CHECK(compare_with_reference(write_tokenizer(tmp.path() / "tiny", tiny_json(extra)), strings) == strings.size());
  const auto tok = json_tokenizer(tmp.path() / "tiny");
  CHECK(tok.encode("hello world!") == std::vector<int32_t>{20, 12, 17, 8});  // computed by hand in hf_tokenizer.py
  CHECK(tok.encode("hello [M] world", false) == std::vector<int32_t>{12, 21, 5, 14, 2, 7});
  CHECK(tok.encode("<t><t><t>", false) == std::vector<int32_t>{24, 23});
  CHECK(tok.vocab_size() == 25);

  // A normalized added token is matched after NFC: e + U+0301 becomes U+00E9 and then the token.
  const auto e_acute = json::array({added_token(2, "\u00e9", false, {{"normalized", true}})});
  const auto nfc = mini_json({{"e", 0}, {"x", 1}}, json::array(), json::object(), {{"type", "NFC"}}, e_acute);
  const std::vector<std::string> accents = {"xe\u0301x", "x\u00e9x", "e\u0301\u0301", "xx"};
  CHECK(compare_with_reference(write_tokenizer(tmp.path() / "nfc", nfc), accents) == accents.size());
  CHECK(json_tokenizer(tmp.path() / "nfc").encode("xe\u0301x") == std::vector<int32_t>{1, 2, 1});
}

TEST_CASE(
    "hf tokenizer.json: BPE options (ignore_merges, byte_fallback, unk, fuse_unk, prefix, suffix) as the reference",
    "[hf_tokenizer]") {
  test::TempDir tmp("hfmodel");
  const json abc = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  const json abc_merges = {"a b", "b c", "a bc"};
  const json fallback = {{"<unk>", 0}, {"<0x61>", 1}, {"b", 2}, {"<0xC3>", 3}, {"<0xA9>", 4}};
  const std::vector<std::pair<std::string, json>> cases = {
      {"plain", mini_json(abc, abc_merges)},
      {"ignore_merges", mini_json(abc, abc_merges, {{"ignore_merges", true}})},
      {"byte_fallback", mini_json(fallback, json::array(), {{"unk_token", "<unk>"}, {"byte_fallback", true}})},
      {"unk", mini_json(fallback, json::array(), {{"unk_token", "<unk>"}})},
      {"fuse_unk", mini_json(fallback, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}})},
      {"suffix", mini_json({{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}, {"b", 3}},
                           json::array({json::array({"a", "b</w>"})}), {{"end_of_word_suffix", "</w>"}})},
      {"prefix", mini_json({{"a", 0}, {"##b", 1}, {"##c", 2}, {"ab", 3}, {"abc", 4}}, {"a ##b", "ab ##c"},
                           {{"continuing_subword_prefix", "##"}})},
  };
  const std::vector<std::string> strings = {"abc", "ab", "cc", "abcabc", "xyz", "\u00e9b", "bab", "a", ""};
  for (const auto& c : cases) {
    INFO(c.first);
    CHECK(compare_with_reference(write_tokenizer(tmp.path() / c.first, c.second), strings) == strings.size());
  }
  CHECK(json_tokenizer(tmp.path() / "ignore_merges").encode("abc") == std::vector<int32_t>{5});
  CHECK(json_tokenizer(tmp.path() / "plain").encode("abc") == std::vector<int32_t>{3, 2});
  CHECK(json_tokenizer(tmp.path() / "byte_fallback").encode("\u00e9b") == std::vector<int32_t>{3, 4, 2});

  // SmolLM's Digits pre-tokenizer (the reference has none: ids computed by hand). Each digit alone: no merges
  // across digits; in runs: 1 2 -> 12, 12 3 -> 123.
  const json digits = {{"1", 0}, {"2", 1}, {"3", 2}, {"12", 3}, {"123", 4}, {"a", 5}};
  for (const bool individual : {true, false}) {
    auto j = mini_json(digits, {"1 2", "12 3"});
    j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", individual}};
    const auto dir = write_tokenizer(tmp.path() / fmt::format("digits-{}", individual), j);
    CHECK(json_tokenizer(dir).encode("a123a") ==
          (individual ? std::vector<int32_t>{5, 0, 1, 2, 5} : std::vector<int32_t>{5, 4, 5}));
  }
}

namespace {

// The DataError message of loading `dir` ("" when it loads).
std::string load_error(const fs::path& dir) {
  try {
    load_hf_tokenizer(dir.string());
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

// tiny_json() with `change` applied, written to DIR/NAME, and its load error.
std::string damaged(const fs::path& root, const std::string& name, const std::function<void(json&)>& change) {
  auto j = tiny_json();
  change(j);
  return load_error(write_tokenizer(root / name, j));
}

}  // namespace

TEST_CASE("hf tokenizer: damaged or unsupported files are refused naming the file and the key", "[hf_tokenizer]") {
  using Catch::Contains;
  test::TempDir tmp("hfbad");
  const auto file = [&](const std::string& name) { return (tmp.path() / name / "tokenizer.json").string(); };
  fs::create_directories(tmp.path() / "broken");
  test::spit(file("broken"), R"({"model": {"vocab": {"a": 0}, "merges": [}})");
  CHECK_THAT(load_error(tmp.path() / "broken"), Contains(file("broken") + ": not valid JSON at byte 42"));
  CHECK_THAT(damaged(tmp.path(), "novocab", [](json& j) { j["model"].erase("vocab"); }),
             Contains(file("novocab") + ": model.vocab: missing"));
  CHECK_THAT(damaged(tmp.path(), "merge", [](json& j) { j["model"]["merges"].push_back("h zz"); }),
             Contains(file("merge") + ": model.merges[10]: \"zz\" is not in model.vocab"));
  CHECK_THAT(damaged(tmp.path(), "pre",
                     [](json& j) {
                       j["pre_tokenizer"] = {{"type", "Whitespace"}};
                     }),
             Contains(file("pre") + ": pre_tokenizer.type: pre_tokenizer 'Whitespace' is not supported"));
  CHECK_THAT(damaged(tmp.path(), "meta",
                     [](json& j) {
                       j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "first"}};
                     }),
             Contains(file("meta") + ": pre_tokenizer.replacement: missing"));
  CHECK_THAT(
      damaged(tmp.path(), "scheme",
              [](json& j) {
                j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}};
              }),
      Contains(file("scheme") + ": pre_tokenizer.prepend_scheme: 'sometimes' is not one of always, first, never"));
  CHECK_THAT(damaged(tmp.path(), "legacy",
                     [](json& j) {
                       j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}};
                     }),
             Contains(file("legacy") + ": pre_tokenizer.add_prefix_space: false contradicts prepend_scheme 'always'"));
  CHECK_THAT(damaged(tmp.path(), "replace",
                     [](json& j) {
                       j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}};
                     }),
             Contains(file("replace") + ": normalizer.pattern: expected {\"String\": ...}"));
  CHECK_THAT(
      damaged(tmp.path(), "seq",
              [](json& j) {
                j["pre_tokenizer"] = {{"type", "Sequence"},
                                      {"pretokenizers", {j["pre_tokenizer"], {{"type", "Punctuation"}}}}};
              }),
      Contains(file("seq") + ": pre_tokenizer.pretokenizers[1].type: pre_tokenizer 'Punctuation' is not supported"));
  CHECK_THAT(damaged(tmp.path(), "norm",
                     [](json& j) {
                       j["normalizer"] = {{"type", "NFKC"}};
                     }),
             Contains(file("norm") + ": normalizer.type: normalizer 'NFKC' is not supported"));
  CHECK_THAT(damaged(tmp.path(), "post",
                     [](json& j) {
                       j["post_processor"] = {{"type", "RobertaProcessing"}};
                     }),
             Contains(file("post") + ": post_processor.type: post_processor 'RobertaProcessing' is not supported"));
  CHECK_THAT(
      damaged(tmp.path(), "split",
              [](json& j) {
                j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}};
              }),
      Contains(file("split") + ": pre_tokenizer.behavior: 'Removed' is not supported"));
  CHECK_THAT(
      damaged(tmp.path(), "regex",
              [](json& j) {
                j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(\\p{L}"}}}, {"behavior", "Isolated"}};
              }),
      Contains(file("regex") + ": pre_tokenizer.pattern.Regex: the pattern does not compile"));
  CHECK_THAT(damaged(tmp.path(), "dropout", [](json& j) { j["model"]["dropout"] = 0.1; }),
             Contains(file("dropout") + ": model.dropout: 0.1 is not supported"));
  CHECK_THAT(damaged(tmp.path(), "model", [](json& j) { j["model"]["type"] = "WordPiece"; }),
             Contains(file("model") + ": model.type: model 'WordPiece'"));
  CHECK_THAT(damaged(tmp.path(), "decoder",
                     [](json& j) {
                       j["decoder"] = {{"type", "WordPiece"}};
                     }),
             Contains(file("decoder") + ": decoder.type: decoder 'WordPiece'"));
  CHECK_THAT(damaged(tmp.path(), "strip",
                     [](json& j) {
                       j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}};
                     }),
             Contains(file("strip") + ": decoder.start: expected a count"));

  CHECK_THAT(load_error(tmp.path() / "absent"),
             Contains((tmp.path() / "absent").string() + ": the tokenizer directory does not exist"));
  fs::create_directories(tmp.path() / "empty");
  CHECK_THAT(load_error(tmp.path() / "empty"), Contains("neither tokenizer.json nor tokenizer.model"));
  fs::create_directories(tmp.path() / "spm");
  test::spit((tmp.path() / "spm" / "tokenizer.model").string(), "not a protobuf");
  CHECK_THAT(load_error(tmp.path() / "spm"),
             Contains((tmp.path() / "spm" / "tokenizer.model").string() + ": cannot load the SentencePiece model"));

  write_tokenizer(tmp.path() / "config", tiny_json());
  const auto config = (tmp.path() / "config" / "tokenizer_config.json").string();
  test::spit(config, R"({"add_bos_token": "yes"})");
  CHECK_THAT(load_error(tmp.path() / "config"), Contains(config + ": add_bos_token: expected true or false"));
  test::spit(config, R"({"add_bos_token": true, "bos_token": "<nope>"})");
  CHECK_THAT(load_error(tmp.path() / "config"), Contains(config + ": bos_token: \"<nope>\" is not in the vocabulary"));
  test::spit(config, R"({"add_bos_token": true, "bos_token": {"content": "<s>"}})");
  CHECK(load_error(tmp.path() / "config").empty());
}

namespace {

// A SentencePiece BPE model trained here by spm_train on text this test writes.
fs::path train_sentencepiece(const fs::path& root) {
  std::string corpus;
  for (int i = 0; i < 40; ++i)
    corpus += fmt::format(
        "The quick brown fox {} jumps over the lazy dog. It's 2024; I'M SURE they'll agree.\n"
        "Le café est très bon, n'est-ce pas? Straße, Größe, Übung. 你好，世界！ numbers 12345 and {}\n",
        i, i * 7919);
  test::spit((root / "corpus.txt").string(), corpus);
  const auto dir = root / "spm";
  fs::create_directories(dir);
  const auto r = test::run_command(
      fmt::format("spm_train --input={} --model_prefix={} --vocab_size=400 --model_type=bpe --byte_fallback=true "
                  "--character_coverage=1.0 --hard_vocab_limit=false",
                  (root / "corpus.txt").string(), (dir / "tokenizer").string()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// spm_encode's ids of each line (one string per line: the strings hold no line breaks).
std::vector<std::vector<int32_t>> spm_encode(const fs::path& dir, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  const auto in = (dir / "lines.txt").string(), out = (dir / "ids.txt").string();
  test::spit(in, text);
  const auto r = test::run_command(
      fmt::format("spm_encode --model={} --output_format=id < {} > {}", (dir / "tokenizer.model").string(), in, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<std::vector<int32_t>> ids;
  std::istringstream rows(test::slurp(out));
  for (std::string row; std::getline(rows, row);) {
    std::istringstream fields(row);
    ids.emplace_back(std::istream_iterator<int32_t>(fields), std::istream_iterator<int32_t>());
  }
  REQUIRE(ids.size() == lines.size());
  return ids;
}

}  // namespace

TEST_CASE("hf SentencePiece tokenizer.model: the ids of spm_encode; BOS / EOS only as tokenizer_config.json says",
          "[hf_tokenizer]") {
  test::TempDir tmp("hfspm");
  const auto dir = train_sentencepiece(tmp.path());
  std::vector<std::string> lines;
  for (const auto& s : all_strings())
    if (s.find_first_of("\r\n") == std::string::npos && s.find('\0') == std::string::npos) lines.push_back(s);
  const auto expected = spm_encode(dir, lines);
  auto tok = load_hf_tokenizer(dir.string());  // no tokenizer_config.json: nothing added
  CHECK(tok->name() == "hf:" + dir.string());
  size_t mismatched = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (tok->encode(lines[i]) != expected[i] && ++mismatched <= 3) FAIL_CHECK(json(lines[i]).dump());
  CHECK(mismatched == 0);
  CHECK(tok->vocab_size() == 400);
  CHECK(tok->decode(tok->encode("The quick brown fox, 你好 12345.")) == "The quick brown fox, 你好 12345.");

  test::spit((dir / "tokenizer_config.json").string(),
             R"({"add_bos_token": true, "add_eos_token": true, "bos_token": "<s>"})");
  tok = load_hf_tokenizer(dir.string());
  auto framed = expected[1];
  framed.insert(framed.begin(), 1);  // spm_train's defaults: <unk> 0, <s> 1, </s> 2
  framed.push_back(2);
  CHECK(tok->encode(lines[1]) == framed);
  test::spit((dir / "tokenizer_config.json").string(), R"({"add_bos_token": false})");
  CHECK(load_hf_tokenizer(dir.string())->encode(lines[1]) == expected[1]);
  test::spit((dir / "tokenizer_config.json").string(), R"({"add_bos_token": true, "bos_token": "<nope>"})");
  CHECK_THROWS_WITH(load_hf_tokenizer(dir.string()),
                    Catch::Contains("tokenizer_config.json: bos_token: \"<nope>\" is not a piece"));
}

TEST_CASE(
    "hf tokenizer: data.tokenizer = \"hf:DIR\" in a job spec; the directory and vocabulary checked with the inputs",
    "[hf_tokenizer][spec]") {
  test::TempDir tmp("hfspec");
  auto spec_of = [&](const std::string& tokenizer, int vocab) {
    return json{{"data", {{"source", "wikitext103"}, {"path", tmp.path().string()}, {"tokenizer", tokenizer}}},
                {"model", {{"vocab", vocab}}}};
  };
  auto error_of = [&](const json& j) {
    try {
      parse_job_spec(j, "/repo");
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(spec_of("hf:" + tmp.file("tok"), 300))
            .empty());  // a from-scratch vocabulary is checked once the files are read
  CHECK(error_of(spec_of("hf:", 300)) == "data.tokenizer: 'hf:' needs a directory (hf:DIR)");
  CHECK(error_of(spec_of("llama", 300)) == "data.tokenizer: 'llama' is not one of byte, gpt2, hf:DIR");

  for (const char* split : {"train", "valid", "test"})
    test::spit(tmp.file(fmt::format("wiki.{}.raw", split)), "Some text.\n");
  auto problems = [&](const std::string& tokenizer, int vocab) {
    std::vector<std::string> out;
    for (const auto& p : input_problems(parse_job_spec(spec_of(tokenizer, vocab), "/repo"), true, vocab))
      out.push_back(p.what());
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(problems("hf:" + tmp.file("tok"), 300) == V{"data.tokenizer: " + tmp.file("tok") + " does not exist"});
  fs::create_directories(tmp.path() / "tok");
  CHECK(problems("hf:" + tmp.file("tok"), 300) ==
        V{"data.tokenizer: " + tmp.file("tok") + " holds neither tokenizer.json nor tokenizer.model"});
  write_tokenizer(tmp.path() / "tok", tiny_json());
  CHECK(problems("hf:" + tmp.file("tok"), 300).empty());
  CHECK(problems("hf:" + tmp.file("tok"), 20) ==
        V{"model.vocab: 20 is smaller than the hf:" + tmp.file("tok") + " tokenizer's vocabulary of 21"});

  // Starting from a Hugging Face model: a tokenizer smaller than config.json's vocab_size is how checkpoints ship
  // (Qwen2.5's 151,665 tokens in a vocabulary padded to 151,936); a larger one would give ids with no row.
  auto from_model = [&](int vocab) {
    const auto dir = tmp.path() / fmt::format("model{}", vocab);
    const auto r = test::run_command(
        fmt::format("/usr/bin/python3 {}/tests/python/hf_llama.py write {} --vocab {} --hidden 16 --intermediate 32 "
                    "--layers 1 --heads 2",
                    FWLAB_SOURCE_DIR, dir.string(), vocab));
    REQUIRE(r.exit_code == 0);
    auto j = spec_of("hf:" + tmp.file("tok"), vocab);
    j.erase("model");
    j["init_checkpoint"] = "hf:" + dir.string();
    std::vector<std::string> out;
    for (const auto& p : input_problems(parse_job_spec(j, "/repo"), true, 0)) out.push_back(p.what());
    return out;
  };
  CHECK(from_model(32).empty());
  CHECK(
      from_model(20) ==
      V{fmt::format("data.tokenizer: the hf:{} tokenizer has 21 tokens but {}/model20/config.json has vocab_size = 20",
                    tmp.file("tok"), tmp.path().string())});
}

TEST_CASE("hf tokenizer: a corpus is tokenized once into the token cache, uint32 ids past 65,536 tokens",
          "[hf_tokenizer][data]") {
  test::TempDir data("hfcache");
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += fmt::format(" = Section {} = \n The quick brown fox jumps over the lazy dog {} times . 你好 \n", i, i * 31);
  for (const char* split : {"train", "valid", "test"}) test::spit(data.file(fmt::format("wiki.{}.raw", split)), text);
  make_reference(data.path() / "Llama-3-ish", "llama3");
  DataSpec spec;
  spec.source = "wikitext103";
  spec.path = data.path().string();
  spec.tokenizer = "hf:" + data.file("Llama-3-ish");
  const auto first = load_corpus(spec, 0);
  const auto tok = load_hf_tokenizer(spec.hf_tokenizer_dir());
  CHECK(first.tokenizer == spec.tokenizer);
  CHECK(first.vocab == tok->vocab_size());
  CHECK_FALSE(first.cache_hit);
  CHECK(fs::path(first.cache_dir).parent_path() == data.path() / ".fwlab-tokens");
  CHECK(fs::path(first.cache_dir).filename().string().rfind("wikitext103-hf-Llama-3-ish-", 0) == 0);
  CHECK(first.train.to_vector() == tok->encode(text));  // BOS first: the split is one text, as Llama 3's template says
  CHECK(fs::file_size(fs::path(first.cache_dir) / "train.bin") == 2 * static_cast<uintmax_t>(first.train.size()));
  const auto second = load_corpus(spec, 0);
  CHECK(second.cache_hit);
  CHECK(second.cache_dir == first.cache_dir);
  CHECK(second.valid.to_vector() == first.valid.to_vector());

  // A token id past 65,535 (a vocabulary such as Llama 3's 128,256): four bytes per id.
  auto big = tiny_json();
  big["model"]["vocab"]["hello!"] = 70000;
  big["added_tokens"] = json::array();  // else numbered after the vocab's 20 entries, with a warning (as tokenizers)
  big["post_processor"] = nullptr;
  write_tokenizer(data.path() / "big", big);
  spec.tokenizer = "hf:" + data.file("big");
  const auto wide = load_corpus(spec, 0);
  CHECK(wide.vocab == 70001);
  CHECK(fs::file_size(fs::path(wide.cache_dir) / "train.bin") == 4 * static_cast<uintmax_t>(wide.train.size()));
  CHECK(wide.train.to_vector() == load_hf_tokenizer(data.file("big"))->encode(text));
}

TEST_CASE(
    "hf tokenizer: fwlab-worker trains on hf:DIR text and refuses a model vocabulary smaller than the tokenizer's",
    "[hf_tokenizer]") {
  test::TempDir data("hfworker");
  std::string text;
  for (int i = 0; i < 60; ++i) text += fmt::format(" The quick brown fox jumps over the lazy dog {} times . \n", i);
  for (const char* split : {"train", "valid", "test"}) test::spit(data.file(fmt::format("wiki.{}.raw", split)), text);
  make_reference(data.path() / "tok", "qwen2", "--vocab-size 400");
  const auto vocab = load_hf_tokenizer(data.file("tok"))->vocab_size();
  auto run = [&](int64_t model_vocab) {
    test::TempDir job("hfjob");
    const json spec = {
        {"seed", 1},
        {"threads", 1},
        {"data", {{"source", "wikitext103"}, {"path", data.path().string()}, {"tokenizer", "hf:" + data.file("tok")}}},
        {"model",
         {{"d_model", 32}, {"n_layers", 1}, {"n_heads", 2}, {"head_dim", 16}, {"context", 16}, {"vocab", model_vocab}}},
        {"train", {{"steps", 2}, {"batch_size", 2}, {"seq_len", 16}, {"log_every", 1}}},
        {"eval", {{"every", 0}, {"max_tokens", 64}}}};
    test::spit(job.file("job.json"), spec.dump());
    return test::run_command(fmt::format("{} run {}", FWLAB_WORKER, job.path().string()));
  };
  const auto ok = run(vocab);
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  const auto refused = run(vocab - 1);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output,
             Catch::Contains(fmt::format("model.vocab: {} is smaller than the hf:{} tokenizer's vocabulary of {}",
                                         vocab - 1, data.file("tok"), vocab)));
}

namespace {

// A Llama of `style`'s tokenizer in one directory (tokenizer.json + config.json + weights, as a checkpoint ships),
// its expected greedy continuation of `prompt` computed by the float64 reference from the BF16-stored weights.
json write_llama_with_tokenizer(const fs::path& dir, const std::string& style, const std::string& prompt,
                                int generate) {
  make_reference(dir, style);
  const auto ids = reference("encode", dir, {json(prompt)})[0].get<std::vector<int64_t>>();
  const auto vocab = load_hf_tokenizer(dir.string())->vocab_size();
  const auto r = test::run_command(
      fmt::format("/usr/bin/python3 {}/tests/python/hf_llama.py write {} --vocab {} --hidden 32 --intermediate 64 "
                  "--layers 2 --heads 4 --kv-heads 2 --positions 64 --rope-theta 500000 --dtype BF16 "
                  "--expected --generate {} --prompt-ids {}",
                  FWLAB_SOURCE_DIR, dir.string(), vocab, generate, fmt::join(ids, ",")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return json::parse(test::slurp((dir / "expected.json").string()));
}

}  // namespace

TEST_CASE(
    "hf tokenizer: fwlab-worker generate reads and writes text through a Llama 2 / Mistral directory's own "
    "tokenizer.json",
    "[hf_tokenizer]") {
  test::TempDir tmp("hfgen");
  const std::string prompt = "the cat sat on the";
  for (const std::string style : {"llama2", "mistral"}) {
    SECTION(style) {
      const auto dir = tmp.path() / style;
      const auto expected = write_llama_with_tokenizer(dir, style, prompt, 12);
      const auto want = reference("decode", dir, {expected["greedy"]})[0].get<std::string>();
      const auto r =
          test::run_command(fmt::format("{} generate hf:{} --prompt '{}' --tokens 12 --greedy --threads 1 2>{}",
                                        FWLAB_WORKER, dir.string(), prompt, tmp.file("stderr")));
      const auto log = test::slurp(tmp.file("stderr"));
      INFO(log);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.output, Catch::Contains(want + "\n"));  // stdout: the continuation alone
      CHECK_THAT(r.output + log, Catch::Contains("the model computes in Float (--dtype float32)"));
    }
  }
}

namespace {

// Three tokenizers that do not load (issue: each passed `validate` and failed only at `run`): tokenizer.json
// cut in half, a tokenizer.model of random bytes, a merges entry with no space between its two parts.
std::map<std::string, fs::path> damaged_tokenizers(const fs::path& root) {
  const auto good = tiny_json().dump(1);
  const auto truncated = root / "truncated", spm = root / "spm", merges = root / "merges";
  fs::create_directories(truncated);
  test::spit((truncated / "tokenizer.json").string(), good.substr(0, good.size() / 2));
  fs::create_directories(spm);
  std::mt19937 rng(7);
  std::string bytes(2048, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng() & 0xff);
  test::spit((spm / "tokenizer.model").string(), bytes);
  auto bad = tiny_json();
  bad["model"]["merges"][3] = "hello";
  write_tokenizer(merges, bad);
  return {{"tokenizer.json: ", truncated}, {"tokenizer.model", spm}, {"merges[3]", merges}};
}

}  // namespace

TEST_CASE("hf tokenizer: validate and the sweep's pre-flight load the tokenizer as run does, and refuse a damaged one",
          "[hf_tokenizer][spec]") {
  test::TempDir tmp("hfdamaged");
  for (const char* split : {"train", "valid", "test"})
    test::spit(tmp.file(fmt::format("wiki.{}.raw", split)), "Some text.\n");
  const auto job_of = [&](const fs::path& dir) {
    return json{
        {"data", {{"source", "wikitext103"}, {"path", tmp.path().string()}, {"tokenizer", "hf:" + dir.string()}}},
        {"model", {{"vocab", 300}}}};
  };
  CHECK(tokenizer_problems(parse_job_spec(job_of(write_tokenizer(tmp.path() / "good", tiny_json())), "/repo")).empty());
  std::string toml_presets, names;
  for (const auto& [says, dir] : damaged_tokenizers(tmp.path())) {
    INFO(dir);
    const auto problems = tokenizer_problems(parse_job_spec(job_of(dir), "/repo"));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].field() == "data.tokenizer");
    CHECK_THAT(problems[0].what(), Catch::Contains(dir.string()) && Catch::Contains(says));
    // fwlab-worker validate: exit 2, naming the file.
    const auto job = tmp.path() / ("job-" + dir.filename().string());
    fs::create_directories(job);
    test::spit((job / "job.json").string(), job_of(dir).dump());
    const auto r = test::run_command(fmt::format("{} validate {}", FWLAB_WORKER, job.string()));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("data.tokenizer: ") && Catch::Contains(says));
    toml_presets +=
        fmt::format("[preset.tok.{}]\ndata = {{ tokenizer = \"hf:{}\" }}\n", dir.filename().string(), dir.string());
    names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", dir.filename().string());
  }
  // fwlab sweep: every damaged tokenizer named at the line that set it; nothing runs, no database.
  const auto file = tmp.file("t.toml"), db = tmp.file("fwlab.db");
  test::spit(file, fmt::format("[experiment]\nname = \"tok\"\n[defaults]\nsteps = 2\n[defaults.model]\nvocab = 300\n"
                               "[defaults.data]\nsource = \"wikitext103\"\npath = \"{}\"\n[stage.s]\nmixer = "
                               "\"softmax\"\n[grid]\ntok = [{}]\n{}",
                               tmp.path().string(), names, toml_presets));
  const auto r = test::run_command(fmt::format("{} sweep {} --db {}", FWLAB_BIN, file, db));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  for (const auto& [says, dir] : damaged_tokenizers(tmp.path()))
    CHECK_THAT(r.output, Catch::Contains(fmt::format("preset.tok.{}.data.tokenizer: ", dir.filename().string())) &&
                             Catch::Contains(says));
  CHECK_THAT(r.output, Catch::Contains("nothing was run"));
  CHECK_FALSE(fs::exists(db));
}
