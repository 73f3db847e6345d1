#include "text/tokenizers/tokenizer.h"

#include <fmt/format.h>
#include <unicode/uchar.h>

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace fwlab {

// ---- byte level ----------------------------------------------------------------------------------------

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) out[i] = static_cast<char>(ids[i]);
  return out;
}

// ---- UTF-8 / code points -------------------------------------------------------------------------------

namespace {

constexpr char32_t kReplacement = 0xFFFD;

// The WHATWG UTF-8 decoder (what JavaScript's TextDecoder and node's file reading do): each maximal invalid
// subsequence becomes one U+FFFD, so ids match the npm encoder even on malformed input.
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  char32_t cp = 0;
  int needed = 0, seen = 0;
  unsigned lower = 0x80, upper = 0xBF;
  for (size_t i = 0; i < s.size();) {
    const unsigned b = static_cast<unsigned char>(s[i]);
    if (needed == 0) {
      ++i;
      if (b <= 0x7F) {
        out.push_back(b);
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed = 1;
        cp = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        needed = 2;
        cp = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        needed = 3;
        cp = b & 0x07;
      } else {
        out.push_back(kReplacement);
      }
      continue;
    }
    if (b < lower || b > upper) {  // the byte starts over; the sequence so far is one error
      cp = 0;
      needed = seen = 0;
      lower = 0x80;
      upper = 0xBF;
      out.push_back(kReplacement);
      continue;
    }
    ++i;
    lower = 0x80;
    upper = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
    if (++seen == needed) {
      out.push_back(cp);
      cp = 0;
      needed = seen = 0;
    }
  }
  if (needed != 0) out.push_back(kReplacement);
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// JavaScript's \s: WhiteSpace and LineTerminator code points.
bool is_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_letter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_L_MASK;
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK;
}

bool is_other(char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }

// Length of the regex match at position i (always >= 1 for a non-empty rest).
size_t match_at(const std::u32string& s, size_t i) {
  const size_t n = s.size();
  if (s[i] == U'\'' && i + 1 < n) {
    for (std::u32string_view suffix : {U"s", U"t", U"re", U"ve", U"m", U"ll", U"d"})
      if (std::u32string_view(s).substr(i + 1, suffix.size()) == suffix) return 1 + suffix.size();
  }
  auto run = [&](size_t j, bool (*cls)(char32_t)) {
    while (j < n && cls(s[j])) ++j;
    return j;
  };
  for (auto cls : {&is_letter, &is_number, &is_other}) {  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
    const size_t start = s[i] == U' ' ? i + 1 : i;
    if (start < n && cls(s[start])) return run(start, cls) - i;
  }
  const size_t end = run(i, &is_space);          // s[i] is whitespace here
  if (end == n || end - i == 1) return end - i;  // \s+(?!\S) at the end, or the single-space fallback \s+
  return end - i - 1;                            // leave the last space to prefix the next word
}

}  // namespace

std::vector<std::string> Gpt2Bpe::pretokenize(std::string_view text) {
  const auto cps = decode_utf8(text);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < cps.size();) {
    const size_t len = match_at(cps, i);
    std::string piece;
    for (size_t k = i; k < i + len; ++k) append_utf8(piece, cps[k]);
    pieces.push_back(std::move(piece));
    i += len;
  }
  return pieces;
}

// ---- GPT-2 BPE -----------------------------------------------------------------------------------------

Gpt2Bpe::Gpt2Bpe(const std::string& encoder_json, const std::string& vocab_bpe) {
  // GPT-2's reversible byte -> printable code point table (bytes_to_unicode).
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string u;
    append_utf8(u, printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++));
    byte_to_unicode_[b] = u;
    unicode_to_byte_[u] = static_cast<uint8_t>(b);
  }

  std::ifstream enc(encoder_json);
  if (!enc) throw std::runtime_error(fmt::format("{}: cannot open", encoder_json));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(enc);
  } catch (const nlohmann::json::exception& e) {  // parse errors and number overflows
    throw std::runtime_error(fmt::format("{}: not valid JSON: {}", encoder_json, e.what()));
  }
  if (!j.is_object()) throw std::runtime_error(fmt::format("{}: expected an object of token -> id", encoder_json));
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      throw std::runtime_error(fmt::format("{}: token {} has id {}, not a non-negative integer", encoder_json,
                                           nlohmann::json(token).dump(), id.dump()));
    const auto i = static_cast<size_t>(id.get<int64_t>());
    encoder_[token] = static_cast<int32_t>(i);
    if (decoder_.size() <= i) decoder_.resize(i + 1);
    decoder_[i] = token;
  }

  std::ifstream bpe_file(vocab_bpe);
  if (!bpe_file) throw std::runtime_error(fmt::format("{}: cannot open", vocab_bpe));
  std::stringstream buffer;
  buffer << bpe_file.rdbuf();
  const std::string text = buffer.str();
  std::vector<std::string> lines;
  for (size_t start = 0;;) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  // As the reference encoder: drop the version line and the last line.
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    std::istringstream parts(lines[i]);
    std::string first, second, rest;
    if (!(parts >> first >> second) || (parts >> rest))
      throw std::runtime_error(fmt::format("{}:{}: a merge is two symbols separated by a space", vocab_bpe, i + 1));
    // The npm encoder keys its rank table by the JavaScript string of the pair, "first,second"; a later merge
    // wins on a clash. Keying the same way keeps the ids identical to it.
    ranks_[first + "," + second] = static_cast<int32_t>(i - 1);
  }
}

std::vector<int32_t> Gpt2Bpe::bpe(const std::string& piece) const {
  if (auto it = cache_.find(piece); it != cache_.end()) return it->second;
  std::vector<std::string> word;
  for (auto c : piece) word.push_back(byte_to_unicode_[static_cast<unsigned char>(c)]);
  while (word.size() > 1) {
    // Lowest-ranked adjacent pair; among equal ranks the rightmost, as the reference's rank -> pair map keeps.
    int64_t best_rank = std::numeric_limits<int64_t>::max();
    size_t best = 0;
    bool found = false;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = ranks_.find(word[i] + "," + word[i + 1]);
      if (it != ranks_.end() && it->second <= best_rank) {
        best_rank = it->second;
        best = i;
        found = true;
      }
    }
    if (!found) break;
    const std::string first = word[best], second = word[best + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = std::move(merged);
  }
  std::vector<int32_t> ids;
  for (const auto& symbol : word) {
    auto it = encoder_.find(symbol);
    if (it == encoder_.end()) throw std::runtime_error(fmt::format("BPE symbol '{}' is not in encoder.json", symbol));
    ids.push_back(it->second);
  }
  cache_.emplace(piece, ids);
  return ids;
}

std::vector<int32_t> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const auto& piece : pretokenize(text)) {
    auto part = bpe(piece);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

std::string Gpt2Bpe::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= decoder_.size())
      throw std::runtime_error(fmt::format("token id {} is outside the vocabulary of {}", id, decoder_.size()));
    const auto symbols = decode_utf8(decoder_[static_cast<size_t>(id)]);
    for (auto cp : symbols) {
      std::string u;
      append_utf8(u, cp);
      out += static_cast<char>(unicode_to_byte_.at(u));
    }
  }
  return out;
}

}  // namespace fwlab
