#include "worker/parallel_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include "contract/formats/corpus_files.h"
#include "contract/formats/parallel_corpus.h"
#include "text/tokenizers/joint_vocabulary.h"

namespace fwlab {

std::string vocabulary_file(const DataSpec& data) {
  if (!data.vocab.empty()) {
    if (!std::filesystem::is_regular_file(data.vocab_path()))
      throw DataError(
          fmt::format("data.vocab: {} does not exist (a SentencePiece model; or set data.vocab_size to learn one)",
                      data.vocab_path()));
    return data.vocab_path();
  }
  return joint_vocabulary(data.path, data.src, data.tgt, data.vocab_size);
}

namespace {

std::vector<int64_t> encode_line(const SentencePieceModel& sp, const std::string& line) {
  const auto ids = sp.encode(line.data(), line.size());
  std::vector<int64_t> out(ids.begin(), ids.end());
  out.push_back(kEosId);
  return out;
}

// Pairs that fit the context (source and target each with EOS, the decoder's input one longer than the target
// without EOS); the number dropped.
int64_t encode_split(const ParallelSplit& split, const SentencePieceModel& sp, int64_t context,
                     std::vector<TokenPair>& out) {
  int64_t dropped = 0;
  for (size_t i = 0; i < split.source.size(); ++i) {
    TokenPair p{encode_line(sp, split.source[i]), encode_line(sp, split.target[i])};
    if (static_cast<int64_t>(p.source.size()) > context || static_cast<int64_t>(p.target.size()) > context)
      ++dropped;
    else
      out.push_back(std::move(p));
  }
  return dropped;
}

}  // namespace

ParallelData load_parallel_data(const DataSpec& data, const SentencePieceModel& sp, int64_t context,
                                int64_t test_limit) {
  ParallelData out;
  out.dropped_train = encode_split(read_parallel(data.path, "train", data.src, data.tgt), sp, context, out.train);
  out.dropped_valid = encode_split(read_parallel(data.path, "valid", data.src, data.tgt), sp, context, out.valid);
  if (out.train.empty())
    throw DataError(fmt::format("{}: no training pair fits the model's context of {} tokens", data.path, context));
  if (out.valid.empty())
    throw DataError(fmt::format("{}: no validation pair fits the model's context of {} tokens", data.path, context));
  auto test = read_parallel(data.path, "test", data.src, data.tgt);
  const size_t n = test_limit > 0 ? std::min(test.source.size(), static_cast<size_t>(test_limit)) : test.source.size();
  for (size_t i = 0; i < n; ++i) {
    auto source = encode_line(sp, test.source[i]);
    if (static_cast<int64_t>(source.size()) > context) {
      source.resize(static_cast<size_t>(context));
      source.back() = kEosId;
      ++out.truncated_test;
    }
    out.test.push_back({std::move(source), {}});
    out.test_references.push_back(test.target[i]);
  }
  return out;
}

PairBatch collate(const std::vector<TokenPair>& pairs, const std::vector<size_t>& rows, torch::Device device) {
  size_t S = 1, T = 1;
  for (auto r : rows) S = std::max(S, pairs[r].source.size()), T = std::max(T, pairs[r].target.size());
  const auto B = static_cast<int64_t>(rows.size());
  auto src = torch::full({B, static_cast<int64_t>(S)}, kPadId, torch::kLong),
       prev = torch::full({B, static_cast<int64_t>(T)}, kPadId, torch::kLong);
  auto target = torch::full({B, static_cast<int64_t>(T)}, kPadId, torch::kLong);
  auto s = src.accessor<int64_t, 2>(), p = prev.accessor<int64_t, 2>(), t = target.accessor<int64_t, 2>();
  int64_t tokens = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& pair = pairs[rows[static_cast<size_t>(b)]];
    for (size_t i = 0; i < pair.source.size(); ++i) s[b][static_cast<int64_t>(i)] = pair.source[i];
    p[b][0] = kBosId;
    for (size_t i = 0; i < pair.target.size(); ++i) {
      t[b][static_cast<int64_t>(i)] = pair.target[i];
      if (i + 1 < pair.target.size()) p[b][static_cast<int64_t>(i + 1)] = pair.target[i];
    }
    tokens += static_cast<int64_t>(pair.target.size());
  }
  return {src.to(device), prev.to(device), target.to(device), tokens};
}

std::vector<std::vector<size_t>> token_batches(const std::vector<TokenPair>& pairs, int64_t batch_tokens,
                                               uint64_t seed) {
  std::vector<size_t> order(pairs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto longest = [&](size_t i) { return std::max(pairs[i].source.size(), pairs[i].target.size()); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return longest(a) < longest(b); });
  std::vector<std::vector<size_t>> batches(1);
  for (auto i : order) {
    // Sorted ascending, so this pair is the longest of its batch.
    const auto rows = static_cast<int64_t>(batches.back().size()) + 1;
    if (!batches.back().empty() && rows * static_cast<int64_t>(longest(i)) > batch_tokens) batches.emplace_back();
    batches.back().push_back(i);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

}  // namespace fwlab
