#include "text/batches/passkey.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <stdexcept>

namespace fwlab {

namespace {

std::vector<int64_t> plain(const Tokenizer& tok, const std::string& text) {
  const auto ids = tok.encode_plain(text);
  return {ids.begin(), ids.end()};
}

void append(std::vector<int64_t>& out, const std::vector<int64_t>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

void append_filler(std::vector<int64_t>& out, const std::vector<int64_t>& filler, int64_t from, int64_t n) {
  const auto size = static_cast<int64_t>(filler.size());
  for (int64_t i = 0; i < n; ++i) out.push_back(filler[static_cast<size_t>((from + i) % size)]);
}

}  // namespace

std::vector<int64_t> passkey_filler(const Tokenizer& tok, const std::string& text) {
  const std::string repeat =
      "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
  auto ids = plain(tok, text.empty() ? repeat : text);
  if (ids.empty()) throw std::invalid_argument("passkey: the filler text encodes to no token");
  return ids;
}

PasskeyPrompt passkey_prompt(const Tokenizer& tok, const std::vector<int64_t>& filler, int64_t length,
                             int64_t depth_percent, int64_t key, int64_t offset) {
  const auto specials = tok.encode("");  // the tokenizer's own leading tokens (a BOS), as a whole prompt would get
  const auto intro =
      plain(tok,
            "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
            "I will quiz you about the important information there.\n");
  const auto key_sentence = plain(tok, fmt::format("\nThe pass key is {0}. Remember it. {0} is the pass key.\n", key));
  const auto question = plain(tok, "\nWhat is the pass key? The pass key is");
  const auto fixed = static_cast<int64_t>(specials.size() + intro.size() + key_sentence.size() + question.size());
  const int64_t n = length - fixed;
  if (n <= 0)
    throw std::invalid_argument(fmt::format(
        "passkey: a prompt of {} tokens leaves no room for filler ({} tokens are fixed text)", length, fixed));
  const auto before =
      static_cast<int64_t>(std::llround(static_cast<double>(depth_percent) * static_cast<double>(n) / 100.0));
  PasskeyPrompt p;
  p.key = key;
  p.ids.assign(specials.begin(), specials.end());
  append(p.ids, intro);
  p.filler_from = static_cast<int64_t>(p.ids.size());
  append_filler(p.ids, filler, offset, before);
  p.key_at = static_cast<int64_t>(p.ids.size());
  append(p.ids, key_sentence);
  append_filler(p.ids, filler, offset + before, n - before);
  append(p.ids, question);
  p.filler_tokens = n;
  return p;
}

bool passkey_correct(const std::string& generated, int64_t key) {
  size_t i = 0;
  while (i < generated.size() && !std::isdigit(static_cast<unsigned char>(generated[i]))) ++i;
  size_t j = i;
  while (j < generated.size() && std::isdigit(static_cast<unsigned char>(generated[j]))) ++j;
  return j > i && j - i < 12 && std::stoll(generated.substr(i, j - i)) == key;
}

}  // namespace fwlab
