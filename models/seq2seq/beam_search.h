// Batched greedy and beam search for an encoder-decoder translation model, with fairseq's rules
// (fairseq/sequence_generator.py with search.BeamSearch). The model is hidden behind StepDecoder, so the search
// knows nothing of it: the encoder output, the KV caches and whatever else a row carries live in the decoder.
//
// Devices: the running scores live on the device the log-probabilities come on; the tokens and rows handed to the
// decoder are int64 tensors on that device too, except the very first BOS tokens, which are made before any
// log-probabilities exist and so are on the CPU (a decoder elsewhere moves them with .to(), a no-op afterwards).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace fwlab {

struct BeamOptions {
  int64_t beam = 5;
  int64_t max_len = 200;              // tokens before EOS at most: at step max_len only EOS may follow
  double len_penalty = 1.0;           // alpha
  std::string penalty = "fairseq";    // fairseq: score = sum logprob / len^alpha, len = tokens generated, EOS included
                                      // gnmt: score = sum logprob / ((5 + len) / 6)^alpha (Wu et al. 2016)
  int64_t bos = 2, eos = 3, pad = 0;  // pad and bos are never generated
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated tokens, BOS not included, the final EOS included
  double logprob = 0;           // summed log-probability, EOS included
  double score = 0;             // logprob after the length penalty
};
// A sentence for which no output was possible (EOS at -inf even when forced at max_len) gets an empty Hypothesis
// with logprob and score at -inf: every sentence has an answer.

// The decoder, as rows of a batch of states. step(tokens [N] int64) -> log-probabilities [N, V] (float or double)
// of the next token for each row, after feeding it `tokens` (the first call feeds BOS). reorder(rows [N'] int64)
// replaces the decoder's rows: new row i is a copy of old row rows[i] (N' may differ from N: beams are expanded
// and finished sentences dropped).
struct StepDecoder {
  std::function<torch::Tensor(const torch::Tensor& tokens)> step;
  std::function<void(const torch::Tensor& rows)> reorder;
};

// The decoder starts with `batch` rows, one per source sentence. Returns the best hypothesis of each sentence, in
// order. The first step runs on those `batch` rows; the first reorder expands each to `beam` rows.
std::vector<Hypothesis> beam_search(StepDecoder& decoder, int64_t batch, const BeamOptions& options);

// beam 1 without the 2*beam candidate machinery: the arg-max token at each step until EOS or max_len.
// options.beam is not read. Gives the same hypotheses as beam_search with beam 1.
std::vector<Hypothesis> greedy_search(StepDecoder& decoder, int64_t batch, const BeamOptions& options);

// The length penalty's divisor for a hypothesis of `length` tokens (EOS included). Throws std::invalid_argument
// for a penalty other than "fairseq" or "gnmt".
double length_divisor(int64_t length, const BeamOptions& options);

}  // namespace fwlab
