// A Hugging Face tokenizer.json (byte-level BPE as GPT-2, Llama 3 and Qwen2 ship it; Metaspace and the other
// components fwlab reads): loaded as the worker loads it, or refused with DataError naming the file and the key.
// A tokenizer that loads encodes any text into ids of its vocabulary and decodes them back without failing.
#include <algorithm>
#include <memory>
#include <string_view>

#include "contract/formats/corpus_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "text/tokenizers/hf_tokenizer.h"

using namespace fwlab;

namespace {

void exercise(const Tokenizer& tok, std::string_view text) {
  const auto ids = tok.encode(text);
  for (const auto id : ids)
    if (id < 0 || id >= tok.vocab_size()) fuzz::violated("encode gave an id outside the tokenizer's vocabulary");
  tok.decode(ids);
}

}  // namespace

FWLAB_FUZZ_TARGET(hf_tokenizer) {
  const auto dir = fuzz::scratch_dir("hf_tokenizer");
  fuzz::write_file(dir + "/tokenizer.json", data, size);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = load_hf_tokenizer(dir);
  } catch (const DataError&) {
    return 0;
  }
  exercise(*tok, "Hello world! 你好, ünïcödé\n\t  spaces   and 1234 digits");
  exercise(*tok, std::string_view(reinterpret_cast<const char*>(data), std::min<size_t>(size, 256)));
  return 0;
}
