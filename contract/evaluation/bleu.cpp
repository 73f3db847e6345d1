#include "contract/evaluation/bleu.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace fwlab {

namespace {

using Tokens = std::vector<std::string>;

Tokens whitespace_tokens(const std::string& text) {
  std::istringstream in(text);
  Tokens out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::map<Tokens, int64_t> ngram_counts(const Tokens& tokens, size_t n) {
  std::map<Tokens, int64_t> counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i) ++counts[Tokens(tokens.begin() + i, tokens.begin() + i + n)];
  return counts;
}

// Clipped matches and totals of one segment, added to the corpus sums (Papineni et al. 2002, section 2.1).
void add_segment(BleuScore& s, const Tokens& hyp, const Tokens& ref, const std::string& unk) {
  s.sys_len += static_cast<int64_t>(hyp.size());
  s.ref_len += static_cast<int64_t>(ref.size());
  for (size_t n = 1; n <= 4; ++n) {
    auto ref_counts = ngram_counts(ref, n);
    for (const auto& [gram, count] : ngram_counts(hyp, n)) {
      s.totals[n - 1] += count;
      const auto it = ref_counts.find(gram);
      const bool has_unk = !unk.empty() && std::find(gram.begin(), gram.end(), unk) != gram.end();
      if (it != ref_counts.end() && !has_unk) s.matches[n - 1] += std::min(count, it->second);
    }
  }
}

BleuScore corpus_counts(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                        const std::string& unk, Tokens (*tokenize)(const std::string&)) {
  if (hyps.size() != refs.size())
    throw std::invalid_argument(fmt::format("BLEU: {} hypotheses for {} references", hyps.size(), refs.size()));
  BleuScore s;
  for (size_t i = 0; i < hyps.size(); ++i) add_segment(s, tokenize(hyps[i]), tokenize(refs[i]), unk);
  return s;
}

double brevity_penalty(const BleuScore& s) {
  if (s.sys_len == 0) return 0.0;
  return s.sys_len >= s.ref_len ? 1.0 : std::exp(1.0 - static_cast<double>(s.ref_len) / static_cast<double>(s.sys_len));
}

Tokens tokens_13a(const std::string& segment) { return whitespace_tokens(tokenize_13a(segment)); }

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

BleuScore tokenized_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                         const std::string& unk) {
  auto s = corpus_counts(hypotheses, references, unk, whitespace_tokens);
  s.brevity_penalty = brevity_penalty(s);
  double log_sum = 0;
  bool zero = s.sys_len == 0;
  for (size_t n = 0; n < 4; ++n) {
    s.precisions[n] =
        s.totals[n] > 0 ? 100.0 * static_cast<double>(s.matches[n]) / static_cast<double>(s.totals[n]) : 0.0;
    zero = zero || s.matches[n] == 0;
    if (!zero) log_sum += std::log(s.precisions[n] / 100.0);
  }
  s.bleu = zero ? 0.0 : 100.0 * s.brevity_penalty * std::exp(log_sum / 4.0);
  return s;
}

// sacreBLEU's compute_bleu with smooth_method "exp" (mteval-v13a's smoothing): an order with no match gets
// 100 / (2^k total), k counting the orders without a match so far. No match at all is BLEU 0, precisions 0;
// an order with no n-gram (every hypothesis shorter than n) ends the loop with it and the later ones at 0,
// and sacreBLEU's floored log of 0 makes the score 0.
BleuScore sacre_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  auto s = corpus_counts(hypotheses, references, "", tokens_13a);
  s.brevity_penalty = brevity_penalty(s);
  s.signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0";
  bool any = false;
  for (const auto m : s.matches) any = any || m > 0;
  if (!any) return s;
  double smooth = 1.0, log_sum = 0;
  for (size_t n = 0; n < 4; ++n) {
    if (s.totals[n] == 0) break;
    const auto total = static_cast<double>(s.totals[n]);
    if (s.matches[n] == 0) {
      smooth *= 2;
      s.precisions[n] = 100.0 / (smooth * total);
    } else {
      s.precisions[n] = 100.0 * static_cast<double>(s.matches[n]) / total;
    }
  }
  for (const auto p : s.precisions) log_sum += p > 0 ? std::log(p) : -9999999999.0;
  s.bleu = s.brevity_penalty * std::exp(log_sum / 4.0);
  return s;
}

// tokenizer_13a.py: the text steps, then TokenizerRegexp's four substitutions on the space-padded line, then
// whitespace collapsed. The character classes are ASCII, so matching bytes of UTF-8 gives the same result as
// matching code points (a multi-byte character is never a digit, punctuation mark or space).
std::string tokenize_13a(const std::string& segment) {
  std::string line = segment;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  static const std::regex punctuation(R"(([\x7B-\x7E\x5B-\x60\x20-\x26\x28-\x2B\x3A-\x40\x2F]))");
  static const std::regex period_comma_after(R"(([^0-9])([\.,]))"), period_comma_before(R"(([\.,])([^0-9]))");
  static const std::regex dash_after_digit(R"(([0-9])(-))");
  line = std::regex_replace(line, punctuation, " $1 ");
  line = std::regex_replace(line, period_comma_after, "$1 $2 ");
  line = std::regex_replace(line, period_comma_before, " $1 $2");
  line = std::regex_replace(line, dash_after_digit, "$1 $2 ");
  const auto tokens = whitespace_tokens(line);
  return fmt::format("{}", fmt::join(tokens, " "));
}

}  // namespace fwlab
