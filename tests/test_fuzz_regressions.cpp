// The fuzz targets (tests/fuzz) run in the ordinary test binary on every seed input and every input that once
// crashed a parser: a fixed bug stays fixed without clang or a fuzzing run.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <map>

#include "tests/test_support.h"

int fuzz_experiment(const uint8_t* data, size_t size);
int fuzz_safetensors(const uint8_t* data, size_t size);
int fuzz_ingest(const uint8_t* data, size_t size);
int fuzz_bpe(const uint8_t* data, size_t size);
int fuzz_job_spec(const uint8_t* data, size_t size);
int fuzz_hf_config(const uint8_t* data, size_t size);
int fuzz_hf_tokenizer(const uint8_t* data, size_t size);
int fuzz_task_file(const uint8_t* data, size_t size);
int fuzz_parallel(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

TEST_CASE("fuzz targets: every seed and every kept crashing input parses or is refused cleanly", "[fuzz]") {
  const std::map<std::string, std::function<int(const uint8_t*, size_t)>> targets = {
      {"experiment", fuzz_experiment},
      {"safetensors", fuzz_safetensors},
      {"ingest", fuzz_ingest},
      {"bpe", fuzz_bpe},
      {"job_spec", fuzz_job_spec},
      {"hf_config", fuzz_hf_config},
      {"hf_tokenizer", fuzz_hf_tokenizer},
      {"task_file", fuzz_task_file},
      {"parallel", fuzz_parallel}};
  for (const auto& [name, target] : targets) {
    size_t seeds = 0, regressions = 0;
    for (const char* kind : {"corpus", "regressions"}) {
      const fs::path dir = fs::path(FWLAB_SOURCE_DIR) / "tests" / "fuzz" / kind / name;
      if (!fs::is_directory(dir)) continue;
      for (const auto& entry : fs::directory_iterator(dir)) {
        const auto bytes = fwlab::test::slurp(entry.path().string());
        INFO(name << ": " << entry.path().string());
        CHECK_NOTHROW(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
        ++(std::string(kind) == "corpus" ? seeds : regressions);
      }
    }
    INFO(name);
    CHECK(seeds >= 3);  // each target has seeds of its own (valid and invalid files)
  }
}
