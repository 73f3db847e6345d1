// Corpora in every format users bring, on small files the tests make; MQAR; evaluation windows.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <numeric>
#include <set>

#include "tests/test_support.h"
#include "text/corpora/corpus.h"
#include "text/corpora/dataset.h"
#include "text/batches/mqar.h"
#include "text/batches/retrieval.h"

using namespace fwlab;
namespace fs = std::filesystem;

TEST_CASE("Brown: tags stripped back to running text", "[data]") {
  const std::string tagged =
      "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ./.\n\n\n"
      "\tAtlanta's/np$ 1/2/cd term-end/nn presentments/nns\n";
  CHECK(strip_brown_tags(tagged) ==
        "The Fulton County said `` no evidence '' .\nAtlanta's 1/2 term-end presentments\n");
}

TEST_CASE("Brown: deterministic split by file, 450 / 25 / 25", "[data]") {
  test::TempDir dir("brown");
  for (int i = 0; i < 40; ++i)
    test::spit(dir.file(fmt::format("c{}{:02d}", "abc"[i % 3], i)), fmt::format("\tfile/nn {}/cd\n", i));
  test::spit(dir.file("README"), "not a corpus file");
  auto s = load_brown(dir.path().string());
  // Sorted names: ca00, ca03, ..., cb01, ...; index 18 -> valid, 19 -> test, 38 -> valid, 39 -> test.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename() != "README") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  auto number_of = [&](size_t i) { return std::to_string(std::stoi(names[i].substr(2))); };
  CHECK(s.valid == "file " + number_of(18) + "\nfile " + number_of(38) + "\n");
  CHECK(s.test == "file " + number_of(19) + "\nfile " + number_of(39) + "\n");
  CHECK(std::count(s.train.begin(), s.train.end(), '\n') == 36);

  auto real = load_brown(FWLAB_SOURCE_DIR "/data/brown");                 // the shipped corpus: 500 files
  CHECK(real.train.size() > 8 * (real.valid.size() + real.test.size()));  // 450 of 500 files
  CHECK(real.valid.find("/nn") == std::string::npos);
  CHECK_THROWS_WITH(load_brown(dir.file("missing")), Catch::Contains("cannot list the Brown corpus directory"));
}

TEST_CASE("WikiText-103 raw layout", "[data]") {
  test::TempDir dir("wikitext");
  test::spit(dir.file("wiki.train.raw"), " = Valkyria = \n train text \n");
  test::spit(dir.file("wiki.valid.raw"), " valid text \n");
  test::spit(dir.file("wiki.test.raw"), " test text \n");
  auto s = load_wikitext(dir.path().string());
  CHECK(s.train == " = Valkyria = \n train text \n");
  CHECK(s.valid == " valid text \n");
  CHECK(s.test == " test text \n");
  fs::remove(dir.file("wiki.test.raw"));
  CHECK_THROWS_WITH(load_wikitext(dir.path().string()), Catch::EndsWith("wiki.test.raw: cannot open"));
}

TEST_CASE("enwik8: raw bytes split 90 / 5 / 5", "[data]") {
  test::TempDir dir("enwik8");
  std::string bytes(2000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 % 256);
  test::spit(dir.file("enwik8"), bytes);
  auto s = load_enwik8(dir.file("enwik8"));
  CHECK(s.train == bytes.substr(0, 1800));
  CHECK(s.valid == bytes.substr(1800, 100));
  CHECK(s.test == bytes.substr(1900));
}

TEST_CASE("pre-tokenised files: uint16 and uint32, nanoGPT's val.bin, an optional test split", "[data]") {
  test::TempDir dir("tokens");
  auto write = [&](const char* name, std::vector<uint32_t> ids, int width = 2) {
    std::string b;
    for (auto id : ids)
      for (int k = 0; k < width; ++k) b += static_cast<char>((id >> (8 * k)) & 0xff);
    test::spit(dir.file(name), b);
  };
  write("train.bin", {1, 2, 300, 50256});
  write("valid.bin", {7});
  write("test.bin", {8, 9});
  auto t = map_token_files(dir.path().string(), 2, 50257);
  CHECK(t.train.to_vector() == std::vector<int32_t>{1, 2, 300, 50256});
  CHECK(t.valid.to_vector() == std::vector<int32_t>{7});
  CHECK(t.test.to_vector() == std::vector<int32_t>{8, 9});
  // The training split is checked as windows are read, so that a huge file is never scanned whole.
  auto small = map_token_files(dir.path().string(), 2, 300);
  CHECK(small.train.slice(0, 2) == std::vector<int32_t>{1, 2});
  CHECK_THROWS_WITH(small.train.slice(1, 2),
                    Catch::Contains("train.bin: token 300 at byte offset 4 is outside the vocabulary of 300"));
  test::spit(dir.file("valid.bin"), "abc");
  CHECK_THROWS_WITH(map_token_files(dir.path().string(), 2, 50257),
                    Catch::Contains("valid.bin: 3 bytes is not a whole number of uint16 tokens"));
  // nanoGPT's layout: val.bin, no test.bin; uint32 ids beyond 65,535.
  fs::remove(dir.file("valid.bin"));
  fs::remove(dir.file("test.bin"));
  write("train.bin", {70000, 5, 131071}, 4);
  write("val.bin", {99999}, 4);
  auto big = map_token_files(dir.path().string(), 4, 131072);
  CHECK(big.train.to_vector() == std::vector<int32_t>{70000, 5, 131071});
  CHECK(big.valid.to_vector() == std::vector<int32_t>{99999});
  CHECK(big.test.empty());
  CHECK_THROWS_WITH(map_token_files(dir.path().string(), 4, 70000),
                    Catch::Contains("val.bin: token 99999 at byte offset 0"));
}

TEST_CASE("MQAR: pairs, queries and labels", "[data]") {
  MqarSpec spec{64, 128, 8, 0.01, {}, {}};
  auto b = make_mqar_batch(spec, 32, 7);
  REQUIRE(b.inputs.size() == 32u * 128u);
  std::vector<int64_t> query_positions;
  int filler_after_query = 0, zeros = 0;
  for (int64_t r = 0; r < 32; ++r) {
    const int32_t* x = &b.inputs[static_cast<size_t>(r * 128)];
    const int32_t* y = &b.targets[static_cast<size_t>(r * 128)];
    std::map<int32_t, int32_t> kv;
    std::set<int32_t> keys;
    for (int i = 0; i < 8; ++i) {
      CHECK(x[2 * i] >= 1);
      CHECK(x[2 * i] < 32);
      CHECK(x[2 * i + 1] >= 32);
      kv[x[2 * i]] = x[2 * i + 1];
      keys.insert(x[2 * i]);
    }
    CHECK(keys.size() == 8);  // keys drawn without replacement
    std::set<int32_t> values;
    for (const auto& [k, v] : kv) values.insert(v);
    CHECK(values.size() == 8);  // and values too (Zoology)
    int asked = 0;
    for (int64_t p = 0; p < 128; ++p) {
      if (y[p] < 0) continue;
      ++asked;
      REQUIRE(kv.count(x[p]));
      CHECK(y[p] == kv[x[p]]);  // the label of a query is its key's value
      CHECK(p >= 16);
      query_positions.push_back(p - 16);
    }
    CHECK(asked == 8);                    // every key asked exactly once
    for (int64_t p = 16; p < 128; ++p) {  // fillers: uniform over [0, V), also right after a query (never the answer)
      CHECK(x[p] >= 0);
      CHECK(x[p] < 64);
      if (p > 16 && y[p - 1] >= 0) filler_after_query += x[p] == y[p - 1];
      zeros += x[p] == 0;
    }
  }
  CHECK(filler_after_query < 20);  // the answer follows by chance only (1 in 64: ~4 of the 256 queries)
  CHECK(zeros > 0);                // 0 is a filler too (~1 in 64 of the 3,328 fillers)
  // Power law: queries cluster near the pairs.
  auto near = std::count_if(query_positions.begin(), query_positions.end(), [](int64_t g) { return g < 56; });
  CHECK(near > static_cast<long>(query_positions.size() / 2 + query_positions.size() / 10));
  CHECK(make_mqar_batch(spec, 4, 7).inputs == make_mqar_batch(spec, 4, 7).inputs);
  CHECK(make_mqar_batch(spec, 4, 7).inputs != make_mqar_batch(spec, 4, 8).inputs);
  CHECK_THROWS_WITH(make_mqar_batch(MqarSpec{64, 20, 8, 0.01, {}, {}}, 1, 1),
                    Catch::StartsWith("mqar.seq_len: 20 is too short for 8 pairs"));
  CHECK_THROWS_WITH(make_mqar_batch(MqarSpec{16, 64, 8, 0.01, {}, {}}, 1, 1),
                    Catch::StartsWith("mqar.pairs: 8 distinct keys do not fit"));
}

TEST_CASE("evaluation windows: non-overlapping, or T2R's last half", "[data]") {
  auto plain = eval_windows(100, 16, false, 0);
  REQUIRE(plain.size() == 6);  // starts 0, 16, ..., 80; a window needs 17 tokens
  CHECK(plain[5].start == 80);
  CHECK(plain[5].score_from == 0);
  auto half = eval_windows(100, 16, true, 0);
  // Each target token is scored exactly once: targets are tokens start+1+j for j >= score_from.
  std::vector<int> seen(100, 0);
  for (const auto& w : half)
    for (int64_t j = w.score_from; j < 16; ++j) ++seen[static_cast<size_t>(w.start + 1 + j)];
  CHECK(std::all_of(seen.begin() + 1, seen.begin() + 97, [](int c) { return c == 1; }));
  CHECK(half[1].score_from == 8);
  CHECK(eval_windows(1000, 16, false, 40).size() == 3);  // capped once 48 >= 40 targets are scored
}

TEST_CASE("training windows are a pure function of the seed", "[data]") {
  std::vector<int32_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  const TokenStream tokens(ids);
  auto a = sample_windows(tokens, 4, 9, mix_seed(1, 5));
  CHECK(a == sample_windows(tokens, 4, 9, mix_seed(1, 5)));
  CHECK(a != sample_windows(tokens, 4, 9, mix_seed(1, 6)));
  for (int r = 0; r < 4; ++r)
    for (int j = 1; j < 9; ++j)
      CHECK(a[static_cast<size_t>(r * 9 + j)] == a[static_cast<size_t>(r * 9)] + j);  // contiguous
}

TEST_CASE("associative retrieval: pair tokens, distinct keys and values, queries from the pairs, labels", "[data]") {
  for (const int64_t queries : {int64_t{1}, int64_t{3}, int64_t{0}}) {
    RetrievalSpec spec;
    spec.keys = 12, spec.values = 10, spec.pairs = 6, spec.queries = queries;
    const int64_t asked = queries == 0 ? 6 : queries, L = 6 + asked;
    REQUIRE(spec.seq_len() == L);
    CHECK(spec.vocab() == 12 + 10 + 120);
    const auto b = make_retrieval_batch(spec, 64, 11);
    REQUIRE(b.len == L);
    REQUIRE(b.inputs.size() == static_cast<size_t>(64 * L));
    std::map<int64_t, int> asked_count;  // pair index -> times asked (over rows): the queries cover the pairs
    for (int64_t r = 0; r < 64; ++r) {
      const int32_t* x = &b.inputs[static_cast<size_t>(r * L)];
      const int32_t* y = &b.targets[static_cast<size_t>(r * L)];
      std::map<int64_t, int64_t> value_of;  // key -> value, decoded from the pair tokens independently of the generator
      std::set<int64_t> values;
      for (int64_t i = 0; i < 6; ++i) {
        CHECK(y[i] == -1);  // nothing is asked at a pair
        const int64_t t = x[i] - 22;
        REQUIRE(t >= 0);
        REQUIRE(t < 120);
        value_of[t / 10] = t % 10;
        values.insert(t % 10);
      }
      CHECK(value_of.size() == 6);  // keys distinct
      CHECK(values.size() == 6);    // values distinct
      std::set<int64_t> queried;
      for (int64_t q = 6; q < L; ++q) {
        REQUIRE(x[q] >= 0);
        REQUIRE(x[q] < 12);  // a query token is the key itself
        REQUIRE(value_of.count(x[q]));
        CHECK(y[q] == 12 + value_of[x[q]]);  // its label: the answer token of the value stored with that key
        queried.insert(x[q]);
        int64_t index = 0;
        for (const auto& [k, v] : value_of) index += k < x[q];
        ++asked_count[index];
      }
      CHECK(static_cast<int64_t>(queried.size()) == asked);  // each key asked at most once
    }
    CHECK(asked_count.size() == 6);  // over 64 rows every rank of key gets asked
  }
  RetrievalSpec spec;
  CHECK(make_retrieval_batch(spec, 4, 7).inputs == make_retrieval_batch(spec, 4, 7).inputs);
  CHECK(make_retrieval_batch(spec, 4, 7).inputs != make_retrieval_batch(spec, 4, 8).inputs);
  spec.pairs = 17;
  CHECK_THROWS_WITH(make_retrieval_batch(spec, 1, 1), "retrieval.pairs: 17 distinct keys do not fit in keys = 16");
  spec.pairs = 4, spec.values = 3;
  CHECK_THROWS_WITH(make_retrieval_batch(spec, 1, 1), "retrieval.pairs: 4 distinct values do not fit in values = 3");
}

TEST_CASE("MQAR mix: training batches drawn at each point in proportion to its weight, test points in turn", "[data]") {
  MqarSpec spec;
  spec.vocab = 8192;
  spec.mix = {{64, 4, 5.0}, {128, 8, 1.0}, {256, 16, 2.0}};
  std::map<int64_t, int> seen;
  for (uint64_t seed = 0; seed < 8000; ++seed) ++seen[spec.train_point(seed).seq_len];
  CHECK(seen[64] == Approx(5000).margin(200));  // 5/8, 1/8, 2/8 of 8000 (binomial sd ~ 43, 30, 39)
  CHECK(seen[128] == Approx(1000).margin(150));
  CHECK(seen[256] == Approx(2000).margin(180));
  CHECK(spec.train_point(17).seq_len == spec.train_point(17).seq_len);  // a seed's point is fixed
  const auto batch = make_mqar_batch(spec.at({256, 16, 1.0}), 2, 3);
  CHECK(batch.len == 256);
  CHECK(std::count_if(batch.targets.begin(), batch.targets.end(), [](int32_t t) { return t >= 0; }) == 32);
  CHECK(spec.eval_points().size() == 3);  // no test points: the mix's own
  spec.test_points = {{512, 128, 1.0}};
  CHECK(spec.eval_points()[0].seq_len == 512);
  CHECK(spec.longest() == 512);
  MqarSpec plain;
  CHECK(plain.train_point(5).seq_len == plain.seq_len);
  CHECK(plain.eval_points().size() == 1);
}
