#include "worker/hf_pretokenizer.h"

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

namespace fwlab {

// ---- the byte-level alphabet ---------------------------------------------------------------------------

ByteLevelAlphabet::ByteLevelAlphabet() : byte_of_char_(256 + 68, -1) {
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : 256 + extra++;
    char utf8[4];
    int32_t len = 0;
    U8_APPEND_UNSAFE(utf8, len, cp);
    char_of_byte_[b].assign(utf8, static_cast<size_t>(len));
    byte_of_char_[static_cast<size_t>(cp)] = b;
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

std::string ByteLevelAlphabet::map(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += char_of_byte_[static_cast<unsigned char>(c)];
  return out;
}

bool ByteLevelAlphabet::unmap(std::string_view token, std::string& out) const {
  std::string bytes;
  for (int32_t i = 0, n = static_cast<int32_t>(token.size()); i < n;) {
    UChar32 c;
    U8_NEXT(token.data(), i, n, c);
    if (c < 0 || static_cast<size_t>(c) >= byte_of_char_.size() || byte_of_char_[static_cast<size_t>(c)] < 0) return false;
    bytes += static_cast<char>(byte_of_char_[static_cast<size_t>(c)]);
  }
  out += bytes;
  return true;
}

std::optional<std::string> repair_utf8(std::string_view text) {
  std::string out;
  size_t copied = 0;  // text[0, copied) is already in out (only used once something was ill-formed)
  bool repaired = false;
  for (int32_t i = 0, n = static_cast<int32_t>(text.size()); i < n;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(text.data(), i, n, c);  // one maximal ill-formed subpart per U+FFFD, as the Unicode standard advises
    if (c >= 0) continue;
    out.append(text.substr(copied, static_cast<size_t>(start) - copied));
    out += "\xEF\xBF\xBD";
    copied = static_cast<size_t>(i);
    repaired = true;
  }
  if (!repaired) return std::nullopt;
  out.append(text.substr(copied));
  return out;
}

// ---- the normalizer --------------------------------------------------------------------------------------

Normalizer Normalizer::from_json(const nlohmann::json* spec, const JsonPlace& at) {
  Normalizer n;
  if (!spec) return n;
  const auto type = json_type(*spec, at);
  if (type == "NFC") {
    n.nfc_ = true;
  } else if (type == "Sequence") {
    const auto* parts = json_member(*spec, "normalizers");
    if (!parts || !parts->is_array()) (at / "normalizers").fail("expected a list of normalizers");
    for (size_t i = 0; i < parts->size(); ++i) n.nfc_ |= from_json(&(*parts)[i], (at / "normalizers")[i]).nfc_;
  } else {
    (at / "type").fail(fmt::format("normalizer '{}' is not supported (supported: none, NFC, Sequence of those)", type));
  }
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  if (!nfc_) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const auto* nfc = icu::Normalizer2::getNFCInstance(status);
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (U_SUCCESS(status) && nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw DataError(fmt::format("NFC normalization failed: {}", u_errorName(status)));
  return out;
}

// ---- the pre-tokenizer -----------------------------------------------------------------------------------

namespace {

std::shared_ptr<const icu::RegexPattern> compile(const std::string& pattern, uint32_t flags, const JsonPlace& at) {
  UParseError where{};
  UErrorCode status = U_ZERO_ERROR;
  std::shared_ptr<const icu::RegexPattern> re(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), flags, where, status));
  if (U_FAILURE(status))
    at.fail(fmt::format("the pattern does not compile ({} at offset {})", u_errorName(status), where.offset));
  return re;
}

// GPT-2's split, which ByteLevel applies with use_regex (byte_level.rs).
std::shared_ptr<const icu::RegexPattern> gpt2_pattern() {
  static const auto re = compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", 0,
                                 JsonPlace{"GPT-2's pattern", ""});
  return re;
}

PreTokenizer::Step split_step(const nlohmann::json& spec, const JsonPlace& at) {
  const auto* pattern = json_member(spec, "pattern");
  if (!pattern || !pattern->is_object()) (at / "pattern").fail("expected {\"Regex\": ...} or {\"String\": ...}");
  PreTokenizer::Step step;
  if (const auto* regex = json_member(*pattern, "Regex"); regex && regex->is_string())
    step.split = compile(regex->get<std::string>(), 0, at / "pattern" / "Regex");
  else if (const auto* literal = json_member(*pattern, "String"); literal && literal->is_string())
    step.split = compile(literal->get<std::string>(), UREGEX_LITERAL, at / "pattern" / "String");
  else
    (at / "pattern").fail("expected {\"Regex\": ...} or {\"String\": ...}");
  // The other behaviors (Removed, Merged*, Contiguous) and invert are not in the files fwlab reads: refused.
  if (const auto behavior = json_string(spec, "behavior", "(missing)", at); behavior != "Isolated")
    (at / "behavior").fail(fmt::format("'{}' is not supported (only Isolated)", behavior));
  if (json_bool(spec, "invert", false, at)) (at / "invert").fail("true is not supported (only false)");
  return step;
}

void append_steps(const nlohmann::json& spec, const JsonPlace& at, std::vector<PreTokenizer::Step>& steps) {
  const auto type = json_type(spec, at);
  if (type == "Split") {
    steps.push_back(split_step(spec, at));
  } else if (type == "ByteLevel") {
    PreTokenizer::Step step;  // absent fields take ByteLevel's defaults: all true
    step.byte_level = true;
    step.add_prefix_space = json_bool(spec, "add_prefix_space", true, at);
    step.use_regex = json_bool(spec, "use_regex", true, at);
    steps.push_back(step);
  } else if (type == "Digits") {  // SmolLM's: ASCII digits apart from the rest, each alone or in runs (digits.rs)
    PreTokenizer::Step step;
    step.split = compile(json_bool(spec, "individual_digits", false, at) ? "[0-9]" : "[0-9]+", 0, at);
    steps.push_back(step);
  } else if (type == "Sequence") {
    const auto* parts = json_member(spec, "pretokenizers");
    if (!parts || !parts->is_array()) (at / "pretokenizers").fail("expected a list of pre-tokenizers");
    for (size_t i = 0; i < parts->size(); ++i) append_steps((*parts)[i], (at / "pretokenizers")[i], steps);
  } else {
    (at / "type").fail(fmt::format("pre_tokenizer '{}' is not supported (supported: Split, ByteLevel, Digits, Sequence)", type));
  }
}

// Calls `emit` with the matches of `matcher` in `text` and the stretches between them, in order (Isolated).
void split_isolated(icu::RegexMatcher& matcher, std::string_view text, const std::function<void(std::string_view)>& emit) {
  UErrorCode status = U_ZERO_ERROR;
  UText* ut = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
  matcher.reset(ut);  // UTF-8 text: match offsets are byte offsets
  size_t done = 0;
  while (U_SUCCESS(status) && matcher.find(status)) {
    const auto start = static_cast<size_t>(matcher.start64(status)), end = static_cast<size_t>(matcher.end64(status));
    if (start > done) emit(text.substr(done, start - done));
    if (end > start) emit(text.substr(start, end - start));
    done = end;
  }
  utext_close(ut);
  if (U_FAILURE(status)) throw DataError(fmt::format("the pre-tokenizer's regex failed on the text: {}", u_errorName(status)));
  if (done < text.size()) emit(text.substr(done));
}

std::unique_ptr<icu::RegexMatcher> make_matcher(const icu::RegexPattern& pattern) {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(pattern.matcher(status));
  if (U_SUCCESS(status)) m->setStackLimit(0, status);  // no limit: a megabyte of spaces backtracks deeply
  if (U_FAILURE(status)) throw DataError(fmt::format("cannot make a regex matcher: {}", u_errorName(status)));
  return m;
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json* spec, const JsonPlace& at) {
  PreTokenizer p;
  if (spec) append_steps(*spec, at, p.steps_);
  for (auto& step : p.steps_)
    if (step.byte_level && step.use_regex) step.split = gpt2_pattern();
  return p;
}

void PreTokenizer::run(std::string_view text, const std::function<void(std::string_view)>& emit) const {
  const auto& alphabet = ByteLevelAlphabet::get();
  std::vector<std::unique_ptr<icu::RegexMatcher>> matchers;  // one per step, for all the pieces of this text
  for (const auto& step : steps_) matchers.push_back(step.split ? make_matcher(*step.split) : nullptr);
  std::function<void(size_t, std::string_view)> feed = [&](size_t i, std::string_view piece) {
    if (piece.empty()) return;
    if (i == steps_.size()) return emit(piece);
    const auto& step = steps_[i];
    auto next = [&](std::string_view part) {
      if (!step.byte_level) return feed(i + 1, part);
      const std::string mapped = alphabet.map(part);
      feed(i + 1, mapped);
    };
    std::string prefixed;
    if (step.byte_level && step.add_prefix_space && piece.front() != ' ') {  // per piece, as byte_level.rs does
      prefixed = " " + std::string(piece);
      piece = prefixed;
    }
    if (step.split) split_isolated(*matchers[i], piece, next);
    else next(piece);
  };
  feed(0, text);
}

}  // namespace fwlab
