// ctest's abi_link_check (scripts/fuzz.sh --abi-check) builds this with -D_GLIBCXX_USE_CXX11_ABI=0 forced, as
// a PyTorch wheel before 2.7 compiles everything, and links the torch-free libraries whole (every object file, so
// every fmt / simdjson / ICU / OpenSSL / toml++ symbol they use must resolve against what they link). Linking is
// the main check; the calls below also run each library once, since a type that holds a std::string behind a
// name without one (toml::table) links under either ABI and breaks only when used.
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "contract/job/did_you_mean.h"
#include "contract/job/events.h"
#include "contract/job/file_identity.h"
#include "harness/experiment.h"
#include "text/tokenizers/tokenizer.h"

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

}  // namespace

int main() {
  check(_GLIBCXX_USE_CXX11_ABI == 0, "compiled with _GLIBCXX_USE_CXX11_ABI=0");
  // fmt (fwlab::did_you_mean formats its hint).
  check(fwlab::did_you_mean("learning_rat", {"learning_rate", "warmup"}).find("learning_rate") != std::string::npos,
        "fmt: did_you_mean");
  // OpenSSL (SHA-256 of "abc").
  check(fwlab::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "OpenSSL: sha256_hex");
  // simdjson (the metric fast path of the event reader).
  fwlab::EventReader reader;
  auto line = reader.read(R"({"seq":3,"time":1.5,"type":"metric","key":"train_loss","step":12,"value":2.25})");
  const auto* metric = line ? std::get_if<fwlab::MetricEvent>(&line->event) : nullptr;
  check(metric && metric->key == "train_loss" && metric->step == 12 && metric->value == 2.25, "simdjson: EventReader");
  // ICU (GPT-2's pre-tokenizer classifies letters and digits with u_charType).
  auto pieces = fwlab::Gpt2Bpe::pretokenize("Hello wörld 42");
  check(pieces == std::vector<std::string>{"Hello", " wörld", " 42"}, "ICU: Gpt2Bpe::pretokenize");
  // toml++ (the harness's experiment files).
  try {
    auto e = fwlab::load_experiment(FWLAB_SOURCE_DIR "/experiments/table1.toml", "");
    check(e.name == "table1" && !e.stages.empty(), "toml++: load_experiment");
  } catch (const std::exception& error) {
    std::printf("load_experiment: %s\n", error.what());
    check(false, "toml++: load_experiment");
  }
  std::printf("%s\n", failures ? "abi_link_check: FAILED" : "abi_link_check: passed");
  return failures ? 1 : 0;
}
