#include "text/tokenizers/hf_pretokenizer.h"

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <utility>

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
    if (c < 0 || static_cast<size_t>(c) >= byte_of_char_.size() || byte_of_char_[static_cast<size_t>(c)] < 0)
      return false;
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

namespace {

void append_normalizers(const nlohmann::json& spec, const JsonPlace& at, std::vector<Normalizer::Op>& ops) {
  using Kind = Normalizer::Op::Kind;
  const auto type = json_type(spec, at);
  if (type == "NFC") {
    ops.push_back({Kind::nfc});
  } else if (type == "Prepend") {
    ops.push_back({Kind::prepend, json_string(spec, "prepend", "", at)});
  } else if (type == "Replace") {
    const auto* pattern = json_member(spec, "pattern");
    const auto* literal = pattern && pattern->is_object() ? json_member(*pattern, "String") : nullptr;
    if (!literal || !literal->is_string() || literal->get<std::string>().empty())
      (at / "pattern").fail("expected {\"String\": ...} with a non-empty string (a Regex pattern is not supported)");
    ops.push_back({Kind::replace, literal->get<std::string>(), json_string(spec, "content", "", at)});
  } else if (type == "Sequence") {
    const auto* parts = json_member(spec, "normalizers");
    if (!parts || !parts->is_array()) (at / "normalizers").fail("expected a list of normalizers");
    for (size_t i = 0; i < parts->size(); ++i) append_normalizers((*parts)[i], (at / "normalizers")[i], ops);
  } else {
    (at / "type")
        .fail(fmt::format(
            "normalizer '{}' is not supported (supported: none, NFC, Prepend, Replace, Sequence of those)", type));
  }
}

std::string nfc(std::string_view text) {
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

std::string replace_all(std::string_view text, const std::string& from, const std::string& to) {
  std::string out;
  for (size_t at = 0;;) {
    const auto hit = text.find(from, at);
    out.append(text.substr(at, hit == std::string_view::npos ? std::string_view::npos : hit - at));
    if (hit == std::string_view::npos) return out;
    out += to, at = hit + from.size();
  }
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json* spec, const JsonPlace& at) {
  Normalizer n;
  if (spec && !spec->is_null()) append_normalizers(*spec, at, n.ops_);
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const auto& op : ops_) {
    if (op.kind == Op::Kind::nfc)
      out = nfc(out);
    else if (op.kind == Op::Kind::prepend && !out.empty())
      out = op.text + out;  // prepend.rs: not an empty piece
    else if (op.kind == Op::Kind::replace)
      out = replace_all(out, op.text, op.with);
  }
  return out;
}

// ---- the pre-tokenizer -----------------------------------------------------------------------------------

namespace {

std::shared_ptr<const icu::RegexPattern> compile(const std::string& pattern, uint32_t flags, const JsonPlace& at) {
  UParseError where{};
  UErrorCode status = U_ZERO_ERROR;
  std::shared_ptr<const icu::RegexPattern> re(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), flags, where, status));
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

// metaspace.rs: `replacement` (required), prepend_scheme always | first | never (older files: add_prefix_space,
// whose false tokenizers accepts only with prepend_scheme "never"), split (default true).
PreTokenizer::Step metaspace_split_step(const nlohmann::json& spec, const JsonPlace& at) {
  PreTokenizer::Step step;
  step.metaspace = json_string(spec, "replacement", "", at);
  if (step.metaspace.empty()) (at / "replacement").fail("missing (the character that stands for a space)");
  step.prepend_scheme = json_string(spec, "prepend_scheme", "always", at);
  if (step.prepend_scheme != "always" && step.prepend_scheme != "first" && step.prepend_scheme != "never")
    (at / "prepend_scheme").fail(fmt::format("'{}' is not one of always, first, never", step.prepend_scheme));
  if (!json_bool(spec, "add_prefix_space", true, at) && step.prepend_scheme != "never")
    (at / "add_prefix_space")
        .fail("false contradicts prepend_scheme '" + step.prepend_scheme + "' (tokenizers refuses it too)");
  step.metaspace_split = json_bool(spec, "split", true, at);
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
  } else if (type == "Metaspace") {
    steps.push_back(metaspace_split_step(spec, at));
  } else if (type == "Digits") {  // SmolLM's: ASCII digits apart from the rest, each alone or in runs (digits.rs)
    PreTokenizer::Step step;
    step.split = compile(json_bool(spec, "individual_digits", false, at) ? "[0-9]" : "[0-9]+", 0, at);
    steps.push_back(step);
  } else if (type == "Sequence") {
    const auto* parts = json_member(spec, "pretokenizers");
    if (!parts || !parts->is_array()) (at / "pretokenizers").fail("expected a list of pre-tokenizers");
    for (size_t i = 0; i < parts->size(); ++i) append_steps((*parts)[i], (at / "pretokenizers")[i], steps);
  } else {
    (at / "type")
        .fail(fmt::format(
            "pre_tokenizer '{}' is not supported (supported: Split, ByteLevel, Metaspace, Digits, Sequence)", type));
  }
}

// Calls `emit` with the matches of `matcher` in `text` and the stretches between them, in order (Isolated).
void split_isolated(icu::RegexMatcher& matcher, std::string_view text,
                    const std::function<void(std::string_view)>& emit) {
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
  if (U_FAILURE(status))
    throw DataError(fmt::format("the pre-tokenizer's regex failed on the text: {}", u_errorName(status)));
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

namespace {

// Metaspace on one piece: spaces replaced, the replacement put in front as the scheme says, then (split) a new piece
// at each replacement character, which stays with the text after it (MergedWithNext).
void metaspace(const PreTokenizer::Step& step, std::string_view piece, bool at_start,
               const std::function<void(std::string_view, bool)>& next) {
  auto text = replace_all(piece, " ", step.metaspace);
  const bool prefixed = text.compare(0, step.metaspace.size(), step.metaspace) == 0;
  if (!prefixed && (step.prepend_scheme == "always" || (step.prepend_scheme == "first" && at_start)))
    text = step.metaspace + text;
  if (!step.metaspace_split) return next(text, at_start);
  size_t begin = 0;
  for (size_t hit = text.find(step.metaspace, step.metaspace.size()); hit != std::string::npos;
       hit = text.find(step.metaspace, hit + step.metaspace.size())) {
    if (hit > begin) next(std::string_view(text).substr(begin, hit - begin), at_start && begin == 0);
    begin = hit;
  }
  next(std::string_view(text).substr(begin), at_start && begin == 0);
}

}  // namespace

void PreTokenizer::run(std::string_view text, bool at_start, const std::function<void(std::string_view)>& emit) const {
  const auto& alphabet = ByteLevelAlphabet::get();
  std::vector<std::unique_ptr<icu::RegexMatcher>> matchers;  // one per step, for all the pieces of this text
  for (const auto& step : steps_) matchers.push_back(step.split ? make_matcher(*step.split) : nullptr);
  // `first`: the piece begins at offset 0 of the input (only the first piece of an at-start text does).
  std::function<void(size_t, std::string_view, bool)> feed = [&](size_t i, std::string_view piece, bool first) {
    if (piece.empty()) return;
    if (i == steps_.size()) return emit(piece);
    const auto& step = steps_[i];
    bool leading = first;
    auto next = [&](std::string_view part, bool part_first) {
      if (!step.byte_level) return feed(i + 1, part, part_first);
      const std::string mapped = alphabet.map(part);
      feed(i + 1, mapped, part_first);
    };
    auto in_order = [&](std::string_view part) { next(part, std::exchange(leading, false)); };
    if (!step.metaspace.empty()) return metaspace(step, piece, first, next);
    std::string prefixed;
    if (step.byte_level && step.add_prefix_space && piece.front() != ' ') {  // per piece, as byte_level.rs does
      prefixed = " " + std::string(piece);
      piece = prefixed;
    }
    if (step.split)
      split_isolated(*matchers[i], piece, in_order);
    else
      in_order(piece);
  };
  feed(0, text, at_start);
}

}  // namespace fwlab
