#include "text/tokenizers/hf_bpe_model.h"

#include <fmt/format.h>
#include <unicode/utf8.h>

#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace fwlab {

namespace {

constexpr size_t kCacheLimit = 1 << 18;  // pieces remembered before the cache starts over (bounded memory)

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A merge as its two tokens: "a b" (the older format, one space) or ["a", "b"] (tokenizers >= 0.20).
std::pair<std::string, std::string> merge_tokens(const nlohmann::json& m, const JsonPlace& at) {
  if (m.is_string()) {
    const auto line = m.get<std::string>();
    const auto space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      at.fail(fmt::format("{} is not two tokens separated by one space", quoted(line)));
    return {line.substr(0, space), line.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  at.fail(fmt::format("expected \"a b\" or [\"a\", \"b\"], got {}", json_excerpt(m)));
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& spec, const JsonPlace& at) {
  if (!spec.is_object()) at.fail("missing (expected the BPE model object)");
  if (const auto type = json_string(spec, "type", "BPE", at); type != "BPE")
    (at / "type").fail(fmt::format("model '{}' is not supported (only BPE)", type));
  if (const auto* dropout = json_member(spec, "dropout");
      dropout && !(dropout->is_number() && dropout->get<double>() == 0.0))
    (at / "dropout").fail(fmt::format("{} is not supported: dropout makes encoding random", json_excerpt(*dropout)));
  prefix_ = json_string(spec, "continuing_subword_prefix", "", at);
  suffix_ = json_string(spec, "end_of_word_suffix", "", at);
  fuse_unk_ = json_bool(spec, "fuse_unk", false, at);
  byte_fallback_ = json_bool(spec, "byte_fallback", false, at);
  ignore_merges_ = json_bool(spec, "ignore_merges", false, at);
  read_vocab(spec, at);
  read_merges(spec, at);
  if (const auto unk = json_string(spec, "unk_token", "", at); !unk.empty()) {
    unk_ = token_to_id(unk);
    if (!unk_) (at / "unk_token").fail(fmt::format("{} is not in model.vocab", quoted(unk)));
  }
}

void BpeModel::read_vocab(const nlohmann::json& spec, const JsonPlace& at) {
  const auto* vocab = json_member(spec, "vocab");
  if (!vocab) (at / "vocab").fail("missing (the BPE model needs its vocabulary)");
  if (!vocab->is_object())
    (at / "vocab").fail(fmt::format("expected an object of token -> id, got {}", json_excerpt(*vocab)));
  for (const auto& item : vocab->items()) {
    const auto& id = item.value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      (at / "vocab")
          .fail(fmt::format("token {} has id {}, not an integer in 0 .. 2^31-1", quoted(item.key()), json_excerpt(id)));
    const auto i = static_cast<int32_t>(id.get<int64_t>());
    vocab_[item.key()] = i;
    tokens_[i] = item.key();
    max_id_ = std::max<int64_t>(max_id_, i);
  }
}

void BpeModel::read_merges(const nlohmann::json& spec, const JsonPlace& at) {
  const auto* merges = json_member(spec, "merges");
  if (!merges) (at / "merges").fail("missing (the BPE model needs its merges; [] for none)");
  if (!merges->is_array()) (at / "merges").fail(fmt::format("expected a list, got {}", json_excerpt(*merges)));
  auto id_of = [&](const std::string& token, const JsonPlace& where) {
    const auto id = token_to_id(token);
    if (!id) where.fail(fmt::format("{} is not in model.vocab", quoted(token)));
    return *id;
  };
  int32_t rank = 0;
  for (size_t i = 0; i < merges->size(); ++i) {
    const auto& m = (*merges)[i];
    if (m.is_string() && m.get<std::string>().rfind("#version", 0) == 0) continue;  // merges.txt's header line
    const auto where = (at / "merges")[i];
    const auto [a, b] = merge_tokens(m, where);
    // The joined token drops the right part's continuing_subword_prefix; a later duplicate wins, as in
    // tokenizers (it collects the merges into a map).
    const auto joined = a + b.substr(std::min(prefix_.size(), b.size()));
    merges_[pair_key(id_of(a, where), id_of(b, where))] = Merge{rank++, id_of(joined, where)};
  }
}

std::optional<int32_t> BpeModel::token_to_id(const std::string& token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? std::nullopt : std::optional(it->second);
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  const auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  const auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

// word.rs / merge_word's first loop: one symbol per character (with the prefix on all but the first and the
// suffix on the last); a character outside the vocab becomes its <0xXX> bytes (byte_fallback) or unk_token, or
// is dropped when there is neither. Consecutive unknowns fuse into one with fuse_unk.
std::vector<int32_t> BpeModel::initial_ids(std::string_view piece) const {
  std::vector<int32_t> ids;
  std::optional<int32_t> pending_unk;
  const auto n = static_cast<int32_t>(piece.size());
  for (int32_t i = 0; i < n;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(piece.data(), i, n, c);
    std::string symbol(piece.substr(static_cast<size_t>(start), static_cast<size_t>(i - start)));
    if (start > 0) symbol = prefix_ + symbol;
    if (i == n) symbol += suffix_;
    if (const auto id = token_to_id(symbol)) {
      if (pending_unk) ids.push_back(*pending_unk);
      pending_unk.reset();
      ids.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (const unsigned char byte : symbol)
        if (const auto id = token_to_id(fmt::format("<0x{:02X}>", byte))) bytes.push_back(*id);
      if (bytes.size() == symbol.size()) {  // every byte has its token; a pending unk stays pending, as in Rust
        ids.insert(ids.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (!unk_) continue;
    if (pending_unk && !fuse_unk_) ids.push_back(*pending_unk);
    pending_unk = unk_;
  }
  if (pending_unk) ids.push_back(*pending_unk);
  return ids;
}

// word.rs merge_all: repeatedly join the adjacent pair with the lowest merge rank, the leftmost among equals.
// A queue of (rank, position, joined id); entries made stale by an earlier join are skipped when popped.
std::vector<int32_t> BpeModel::merge(std::vector<int32_t> ids) const {
  const auto n = static_cast<int32_t>(ids.size());
  std::vector<int32_t> next(ids.size()), prev(ids.size());
  std::vector<char> alive(ids.size(), 1);
  for (int32_t k = 0; k < n; ++k) {
    next[k] = k + 1 < n ? k + 1 : -1;
    prev[k] = k - 1;
  }
  using Entry = std::tuple<int32_t, int32_t, int32_t>;  // rank, position, joined id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  auto push = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    if (const auto* m = find_merge(ids[left], ids[next[left]])) queue.emplace(m->rank, left, m->merged);
  };
  for (int32_t k = 0; k + 1 < n; ++k) push(k);
  while (!queue.empty()) {
    const int32_t pos = std::get<1>(queue.top()), merged = std::get<2>(queue.top());
    queue.pop();
    if (!alive[pos] || next[pos] < 0) continue;
    const auto* m = find_merge(ids[pos], ids[next[pos]]);
    if (!m || m->merged != merged) continue;  // the pair changed since it was queued (word.rs compares the id only)
    const int32_t right = next[pos];
    ids[pos] = merged;
    alive[right] = 0;
    next[pos] = next[right];
    if (next[pos] >= 0) prev[next[pos]] = pos;
    push(prev[pos]);
    push(pos);
  }
  std::vector<int32_t> out;
  for (int32_t k = 0; k < n; ++k)
    if (alive[k]) out.push_back(ids[k]);
  return out;
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  std::string key(piece);
  if (const auto it = cache_.find(key); it != cache_.end()) {
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int32_t> out;
  if (const auto whole = ignore_merges_ ? token_to_id(key) : std::nullopt)
    out = {*whole};
  else
    out = merge(initial_ids(piece));
  ids.insert(ids.end(), out.begin(), out.end());
  if (cache_.size() >= kCacheLimit) cache_.clear();
  cache_.emplace(std::move(key), std::move(out));
}

}  // namespace fwlab
