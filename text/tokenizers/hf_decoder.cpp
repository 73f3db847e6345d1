#include "text/tokenizers/hf_decoder.h"

#include <fmt/format.h>

#include "text/tokenizers/hf_pretokenizer.h"

namespace fwlab {

namespace {

using Step = Decoder::Step;

std::string one_character(const nlohmann::json& spec, const char* key, const JsonPlace& at) {
  const auto* value = json_member(spec, key);
  if (!value || !value->is_string() || value->get<std::string>().empty()) (at / key).fail("expected a character");
  return value->get<std::string>();
}

// Replace's pattern: {"String": "▁"} (a literal; a Regex pattern is not in the files fwlab reads).
Step replace_step(const nlohmann::json& spec, const JsonPlace& at) {
  const auto* pattern = json_member(spec, "pattern");
  const auto* literal = pattern && pattern->is_object() ? json_member(*pattern, "String") : nullptr;
  if (!literal || !literal->is_string() || literal->get<std::string>().empty())
    (at / "pattern").fail("expected {\"String\": ...} with a non-empty string (a Regex pattern is not supported)");
  return {Step::Kind::replace, literal->get<std::string>(), json_string(spec, "content", "", at)};
}

Step strip_step(const nlohmann::json& spec, const JsonPlace& at) {
  auto count = [&](const char* key) {
    const auto* v = json_member(spec, key);
    if (!v || !v->is_number_unsigned()) (at / key).fail("expected a count (an integer >= 0)");
    return v->get<size_t>();
  };
  Step s{Step::Kind::strip, one_character(spec, "content", at), ""};
  s.start = count("start"), s.stop = count("stop");
  return s;
}

// metaspace.rs: prepend_scheme always | first | never (older files: add_prefix_space true, meaning always).
Step metaspace_decoder_step(const nlohmann::json& spec, const JsonPlace& at) {
  Step s{Step::Kind::metaspace, one_character(spec, "replacement", at), " "};
  const auto scheme =
      json_string(spec, "prepend_scheme", json_bool(spec, "add_prefix_space", true, at) ? "always" : "never", at);
  if (scheme != "always" && scheme != "first" && scheme != "never")
    (at / "prepend_scheme").fail(fmt::format("'{}' is not one of always, first, never", scheme));
  s.drop_first = scheme != "never";
  return s;
}

void append_steps(const nlohmann::json& spec, const JsonPlace& at, std::vector<Step>& steps) {
  const auto type = json_type(spec, at);
  if (type == "ByteLevel")
    steps.push_back({Step::Kind::byte_level});
  else if (type == "Metaspace")
    steps.push_back(metaspace_decoder_step(spec, at));
  else if (type == "Replace")
    steps.push_back(replace_step(spec, at));
  else if (type == "ByteFallback")
    steps.push_back({Step::Kind::byte_fallback});
  else if (type == "Fuse")
    steps.push_back({Step::Kind::fuse});
  else if (type == "Strip")
    steps.push_back(strip_step(spec, at));
  else if (type == "Sequence") {
    const auto* parts = json_member(spec, "decoders");
    if (!parts || !parts->is_array()) (at / "decoders").fail("expected a list of decoders");
    for (size_t i = 0; i < parts->size(); ++i) append_steps((*parts)[i], (at / "decoders")[i], steps);
  } else {
    (at / "type")
        .fail(fmt::format(
            "decoder '{}' is not supported (supported: none, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, "
            "Sequence of those)",
            type));
  }
}

std::string replaced(const std::string& token, const std::string& from, const std::string& to) {
  std::string out;
  for (size_t at = 0;;) {
    const auto hit = token.find(from, at);
    out.append(token, at, hit == std::string::npos ? std::string::npos : hit - at);
    if (hit == std::string::npos) return out;
    out += to, at = hit + from.size();
  }
}

// byte_fallback.rs: "<0xXX>" (Rust's u8::from_str_radix, so "+A" reads as 10 too); -1 for any other token.
int byte_of(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  if (token[3] == '+') return hex(token[4]);
  const int hi = hex(token[3]), lo = hex(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool valid_utf8(const std::string& s) { return !repair_utf8(s); }

// Runs of byte tokens become their text when it is valid UTF-8, else one U+FFFD per byte (as tokenizers does).
std::vector<std::string> fall_back(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string bytes;
  size_t run = 0;
  auto flush = [&] {
    if (run == 0) return;
    if (valid_utf8(bytes))
      out.push_back(bytes);
    else
      for (size_t i = 0; i < run; ++i) out.emplace_back("\xEF\xBF\xBD");
    bytes.clear(), run = 0;
  };
  for (const auto& token : tokens) {
    if (const int b = byte_of(token); b >= 0) {
      bytes += static_cast<char>(b), ++run;
      continue;
    }
    flush();
    out.push_back(token);
  }
  flush();
  return out;
}

// strip.rs: up to `start` leading and `stop` trailing copies of the character cut from each token.
std::string stripped(const std::string& token, const Step& s) {
  size_t begin = 0, end = token.size();
  for (size_t i = 0; i < s.start && token.compare(begin, s.from.size(), s.from) == 0; ++i) begin += s.from.size();
  for (size_t i = 0;
       i < s.stop && end >= begin + s.from.size() && token.compare(end - s.from.size(), s.from.size(), s.from) == 0;
       ++i)
    end -= s.from.size();
  return token.substr(begin, end - begin);
}

std::vector<std::string> apply(const Step& s, std::vector<std::string> tokens) {
  switch (s.kind) {
    case Step::Kind::byte_level: {  // joins the tokens, each character back to its byte (outside the alphabet: itself)
      std::string bytes;
      for (const auto& token : tokens)
        if (!ByteLevelAlphabet::get().unmap(token, bytes)) bytes += token;
      return {bytes};
    }
    case Step::Kind::metaspace:
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replaced(tokens[i], s.from, i == 0 && s.drop_first ? "" : s.to);
      return tokens;
    case Step::Kind::replace:
      for (auto& token : tokens) token = replaced(token, s.from, s.to);
      return tokens;
    case Step::Kind::byte_fallback:
      return fall_back(tokens);
    case Step::Kind::fuse: {
      std::string all;
      for (const auto& token : tokens) all += token;
      return {all};
    }
    case Step::Kind::strip:
      for (auto& token : tokens) token = stripped(token, s);
      return tokens;
  }
  return tokens;
}

}  // namespace

Decoder Decoder::from_json(const nlohmann::json* spec, const JsonPlace& at) {
  Decoder d;
  if (!spec || spec->is_null()) return d;
  d.present_ = true;
  append_steps(*spec, at, d.steps_);
  return d;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  std::string out;
  if (!present_) {  // no decoder: tokenizers joins the tokens with spaces
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const auto& step : steps_) tokens = apply(step, std::move(tokens));
  for (const auto& token : tokens) out += token;
  return out;
}

}  // namespace fwlab
