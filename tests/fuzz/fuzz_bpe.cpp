// GPT-2's byte-level BPE: any bytes encode; valid UTF-8 decodes back to itself; any ids decode or are refused.
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "text/tokenizers/tokenizer.h"

using namespace fwlab;

namespace {

bool valid_utf8(const uint8_t* s, size_t n) {
  for (size_t i = 0; i < n;) {
    const uint8_t c = s[i];
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

const Gpt2Bpe& tokenizer() {
  static const Gpt2Bpe bpe(std::string(FWLAB_SOURCE_DIR) + "/data/gpt2-bpe/encoder.json",
                           std::string(FWLAB_SOURCE_DIR) + "/data/gpt2-bpe/vocab.bpe");
  return bpe;
}

}  // namespace

FWLAB_FUZZ_TARGET(bpe) {
  const auto& bpe = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto ids = bpe.encode(text);
  for (auto id : ids)
    if (id < 0 || id >= bpe.vocab_size()) fuzz::violated("encode gave an id outside the vocabulary");
  if (valid_utf8(data, size) && bpe.decode(ids) != text) fuzz::violated("decode(encode(text)) != text for valid UTF-8");
  // The same bytes read as token ids: decoded, or refused with an error naming the id.
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  try {
    bpe.decode(raw);
  } catch (const std::runtime_error&) {  // "token id N is outside the vocabulary"
  }
  return 0;
}
