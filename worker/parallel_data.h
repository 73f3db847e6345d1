// A parallel corpus as token ids of its joint vocabulary, and the batches a translation job trains on.
// Length policy (a documented choice, as fairseq's --skip-invalid-size-inputs-valid-test): training and validation
// pairs whose source or target (with its EOS) exceeds the model's context are dropped and counted; test sources
// are truncated to the context (their last EOS kept) and counted, so that every test sentence is translated and
// BLEU is over the whole test set.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "contract/job/job_spec.h"
#include "text/tokenizers/joint_vocabulary.h"  // the ids: 0 pad, 1 unk, 2 bos, 3 eos
#include "text/tokenizers/sentencepiece_model.h"

namespace fwlab {

struct TokenPair {
  std::vector<int64_t> source, target;  // each ends with EOS
};

struct ParallelData {
  std::vector<TokenPair> train, valid, test;
  std::vector<std::string> test_references;  // the target side of the test split, as written
  int64_t dropped_train = 0, dropped_valid = 0, truncated_test = 0;
};

// The vocabulary of a job: data.vocab, or the joint BPE of data.vocab_size (learned and cached on first use).
std::string vocabulary_file(const DataSpec& data);

ParallelData load_parallel_data(const DataSpec& data, const SentencePieceModel& sp, int64_t context,
                                int64_t test_limit);

// One batch: src [B, S] and prev [B, T] (BOS then the target) padded with kPadId; target [B, T] (the target with
// EOS, padded with kPadId, which the loss ignores).
struct PairBatch {
  torch::Tensor src, prev, target;
  int64_t target_tokens = 0;
};
PairBatch collate(const std::vector<TokenPair>& pairs, const std::vector<size_t>& rows, torch::Device device);

// fairseq's batching by tokens: pairs sorted by length, cut into batches whose rows x longest side stays within
// `batch_tokens` (a pair longer than that is a batch of its own); the batches' order shuffled with `seed`.
std::vector<std::vector<size_t>> token_batches(const std::vector<TokenPair>& pairs, int64_t batch_tokens,
                                               uint64_t seed);

}  // namespace fwlab
