#include "text/tokenizers/hf_added_tokens.h"

#include <fmt/format.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstdio>

namespace fwlab {

namespace {

// Rust regex's \w, which single_word tests: Alphabetic, marks, decimal numbers, connector punctuation and
// Join_Control.
bool is_word_char(UChar32 c) {
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

bool is_space(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }  // Rust's char::is_whitespace

UChar32 char_before(std::string_view s, size_t pos) {
  auto i = static_cast<int32_t>(pos);
  UChar32 c;
  U8_PREV(s.data(), 0, i, c);
  return c;
}

UChar32 char_at(std::string_view s, size_t pos) {
  auto i = static_cast<int32_t>(pos);
  UChar32 c;
  U8_NEXT(s.data(), i, static_cast<int32_t>(s.size()), c);
  return c;
}

size_t char_len_before(std::string_view s, size_t pos) { return U8_LENGTH(char_before(s, pos)); }
size_t char_len_at(std::string_view s, size_t pos) { return U8_LENGTH(char_at(s, pos)); }

AddedToken read_token(const nlohmann::json& entry, const Normalizer& normalizer, const JsonPlace& at) {
  if (!entry.is_object()) at.fail(fmt::format("expected an added-token object, got {}", json_excerpt(entry)));
  AddedToken t;
  t.content = json_string(entry, "content", "", at);
  t.single_word = json_bool(entry, "single_word", false, at);
  t.lstrip = json_bool(entry, "lstrip", false, at);
  t.rstrip = json_bool(entry, "rstrip", false, at);
  t.normalized = json_bool(entry, "normalized", true, at);
  t.special = json_bool(entry, "special", false, at);
  t.pattern = t.normalized ? normalizer.apply(t.content) : t.content;
  return t;
}

}  // namespace

AddedVocabulary::AddedVocabulary(const nlohmann::json* list, const BpeModel& model, const Normalizer& normalizer,
                                 const JsonPlace& at) {
  if (list && !list->is_array()) at.fail(fmt::format("expected a list of added tokens, got {}", json_excerpt(*list)));
  auto next_id = static_cast<int32_t>(model.vocab_count());
  for (size_t i = 0; list && i < list->size(); ++i) {
    auto t = read_token((*list)[i], normalizer, at[i]);
    if (t.content.empty()) continue;  // tokenizers skips these
    const auto known = id_of(t.content);
    const auto in_model = model.token_to_id(t.content);
    t.id = known ? *known : in_model ? *in_model : next_id++;
    if (const auto* file_id = json_member((*list)[i], "id");
        file_id && (!file_id->is_number_integer() || file_id->get<int64_t>() != t.id))
      fmt::print(stderr,
                 "warning: {}: {}: token {} has id {} in the file but {} when loaded (as tokenizers assigns it)\n",
                 at.file, at[i].key, nlohmann::json(t.content).dump(), json_excerpt(*file_id), t.id);
    const auto slot = known ? by_content_.at(t.content) : tokens_.size();  // a repeated content replaces its entry
    if (slot == tokens_.size())
      tokens_.push_back(t);
    else
      tokens_[slot] = t;
    by_content_[t.content] = slot;
    by_id_[t.id] = slot;
  }
  for (size_t k = 0; k < tokens_.size(); ++k) {
    if (tokens_[k].pattern.empty()) continue;
    const int which = tokens_[k].normalized ? 1 : 0;
    index_[which][static_cast<unsigned char>(tokens_[k].pattern[0])].push_back(k);
    any_[which] = true;
  }
  auto longer = [this](size_t a, size_t b) { return tokens_[a].pattern.size() > tokens_[b].pattern.size(); };
  for (auto& by_byte : index_)
    for (auto& candidates : by_byte) std::stable_sort(candidates.begin(), candidates.end(), longer);
}

std::optional<int32_t> AddedVocabulary::id_of(const std::string& content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? std::nullopt : std::optional(tokens_[it->second].id);
}

const AddedToken* AddedVocabulary::token(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

int64_t AddedVocabulary::max_id() const {
  int64_t m = -1;
  for (const auto& t : tokens_) m = std::max<int64_t>(m, t.id);
  return m;
}

// Non-overlapping leftmost-longest occurrences (the Aho-Corasick scan of tokenizers). Patterns are whole UTF-8
// characters, so scanning bytes finds only matches on character boundaries.
std::vector<AddedVocabulary::Match> AddedVocabulary::raw_matches(std::string_view text, bool normalized) const {
  std::vector<Match> out;
  const auto& index = index_[normalized ? 1 : 0];
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    for (const size_t k : index[static_cast<unsigned char>(text[i])])
      if (text.compare(i, tokens_[k].pattern.size(), tokens_[k].pattern) == 0) {
        hit = &tokens_[k];
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    out.push_back(Match{i, i + hit->pattern.size(), hit});
    i += hit->pattern.size();
  }
  return out;
}

// single_word refuses a match with a word character on either side; lstrip / rstrip take the white space beside.
bool AddedVocabulary::widen(const AddedToken& t, std::string_view text, size_t& start, size_t& stop) const {
  if (t.single_word && ((start > 0 && is_word_char(char_before(text, start))) ||
                        (stop < text.size() && is_word_char(char_at(text, stop)))))
    return false;
  while (t.lstrip && start > 0 && is_space(char_before(text, start))) start -= char_len_before(text, start);
  while (t.rstrip && stop < text.size() && is_space(char_at(text, stop))) stop += char_len_at(text, stop);
  return true;
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            const std::function<void(std::string_view, int32_t)>& emit) const {
  size_t done = 0;
  if (any_[normalized ? 1 : 0])
    for (auto m : raw_matches(text, normalized)) {
      if (!widen(*m.token, text, m.start, m.stop)) continue;
      m.start = std::max(m.start, done);  // lstrip never reaches into the previous token
      if (m.start > done) emit(text.substr(done, m.start - done), -1);
      emit(text.substr(m.start, m.stop - m.start), m.token->id);
      done = m.stop;
    }
  if (done < text.size()) emit(text.substr(done), -1);
}

}  // namespace fwlab
