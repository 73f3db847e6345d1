// Tokenizers. The GPT-2 BPE must give exactly the ids of the gpt-3-encoder npm package, run under node.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_support.h"
#include "text/corpora/corpus.h"
#include "text/tokenizers/tokenizer.h"

using namespace fwlab;

namespace {

const std::string kBpeDir = FWLAB_SOURCE_DIR "/data/gpt2-bpe";

const Gpt2Bpe& bpe() {
  static const Gpt2Bpe tokenizer(kBpeDir + "/encoder.json", kBpeDir + "/vocab.bpe");
  return tokenizer;
}

// Lines that exercise the pre-tokenizer beyond plain English: contractions, whitespace runs, digits,
// punctuation runs, non-ASCII letters and numbers, symbols outside the BMP.
const std::vector<std::string> kTrickyLines = {
    "I'm sure they'll say it's 'quoted' -- isn't it?",
    "trailing spaces   ",
    "   leading and    inner   runs\tof\ttabs",
    "numbers 12345 and 3.14159, 1,000,000 and ²³ and ٣",
    "naïve café résumé Ünïcödé ß",
    "日本語のテキストと中文",
    "emoji 😀 🎉 and symbols ©®™ € ½",
    "punctuation!!! ??? ... ;;; ((()))",
    "'s 't 're 've 'm 'll 'd 'x",
    "mixed123abc ABC123 __init__ x=y+z",
    "broken \xe2\x80 utf8 \xff\xfe and \xf0\x9f\x98 cut",
    "\xc2\xa0non-breaking\xe2\x80\x83"
    "em space\xe3\x80\x80"
    "ideographic",
};

}  // namespace

TEST_CASE("byte tokenizer: ids are bytes and decoding inverts encoding", "[tokenizer]") {
  ByteTokenizer tok;
  const std::string text("Grand Jury \xc3\xa9\x00\xff", 15);
  auto ids = tok.encode(std::string_view(text.data(), text.size()));
  REQUIRE(ids.size() == text.size());
  CHECK(ids[0] == 'G');
  CHECK(ids.back() == 255);
  CHECK(tok.decode(ids) == text);
  CHECK(tok.vocab_size() == 256);
}

TEST_CASE("GPT-2 pre-tokenizer splits as GPT-2's regex does", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(Gpt2Bpe::pretokenize("Hello world's  test") == V{"Hello", " world", "'s", " ", " test"});
  CHECK(Gpt2Bpe::pretokenize("a  \n b") == V{"a", "  \n", " b"});
  CHECK(Gpt2Bpe::pretokenize("x!! 42abc") == V{"x", "!!", " 42", "abc"});
  CHECK(Gpt2Bpe::pretokenize("end   ") == V{"end", "   "});
}

TEST_CASE("GPT-2 BPE: identical ids to the npm package on thousands of Brown lines, and round trip", "[tokenizer]") {
  test::TempDir dir("bpe");
  auto brown = load_brown(FWLAB_SOURCE_DIR "/data/brown");
  std::vector<std::string> lines;
  std::istringstream in(brown.train);
  std::string line;
  while (lines.size() < 3000 && std::getline(in, line)) lines.push_back(line);
  lines.insert(lines.end(), kTrickyLines.begin(), kTrickyLines.end());
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  test::spit(dir.file("lines.txt"), all);

  auto node = test::run_command(
      fmt::format("node {}/tests/node/bpe_encode.js {} {}", FWLAB_SOURCE_DIR, kBpeDir, dir.file("lines.txt")));
  REQUIRE(node.exit_code == 0);
  std::istringstream out(node.output);
  size_t checked = 0, mismatched = 0;
  for (const auto& l : lines) {
    std::string json_line;
    REQUIRE(std::getline(out, json_line));
    auto expected = nlohmann::json::parse(json_line).get<std::vector<int32_t>>();
    auto ours = bpe().encode(l);
    if (ours != expected) {
      ++mismatched;
      UNSCOPED_INFO("mismatch on line: " << l);
    }
    if (l.rfind("broken", 0) != 0) CHECK(bpe().decode(ours) == l);  // round trip holds for valid UTF-8
    ++checked;
  }
  CHECK(checked == lines.size());
  CHECK(mismatched == 0);
  CHECK(checked >= 3000);
}

TEST_CASE("GPT-2 BPE: vocabulary and errors", "[tokenizer]") {
  CHECK(bpe().vocab_size() == 50257);
  CHECK(bpe().encode("Hello") == std::vector<int32_t>{15496});
  CHECK_THROWS_WITH(bpe().decode({50257}), "token id 50257 is outside the vocabulary of 50257");
  test::TempDir dir("bpe-bad");
  test::spit(dir.file("encoder.json"), "{\"a\": 0, \"b\": -1}");
  test::spit(dir.file("vocab.bpe"), "#version: 0.2\na b\n");
  CHECK_THROWS_WITH(Gpt2Bpe(dir.file("encoder.json"), dir.file("vocab.bpe")), Catch::Contains("token \"b\" has id -1"));
  test::spit(dir.file("encoder.json"), "{\"a\": 0}");
  test::spit(dir.file("vocab.bpe"), "#version: 0.2\na b\nc\n");
  CHECK_THROWS_WITH(Gpt2Bpe(dir.file("encoder.json"), dir.file("vocab.bpe")),
                    Catch::EndsWith("vocab.bpe:3: a merge is two symbols separated by a space"));
}
