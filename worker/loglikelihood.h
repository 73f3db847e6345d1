// Log-likelihood requests scored as lm-evaluation-harness's Hugging Face model does (_encode_pair and
// _loglikelihood_tokens): context and continuation encoded together and split at the context's length, inputs
// left-truncated to the model's context, requests batched by length (longest first, right-padded: every mixer is
// causal, so padding after a sequence changes nothing before it).
#pragma once

#include <cstdint>
#include <vector>

#include "contract/evaluation/eval_task.h"
#include "models/gpt.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

struct EncodedRequest {
  std::vector<int64_t> context, continuation;
};

// lm-eval's _encode_pair: the context's trailing whitespace moves to the continuation; continuation tokens =
// encode(context + continuation)[len(encode(context)):]. Both encodings carry the tokenizer's own special tokens.
EncodedRequest encode_request(const Tokenizer& tok, const LlRequest& request);

struct LlResult {
  double ll = 0;        // sum of the continuation tokens' log-probabilities
  bool greedy = false;  // every continuation token is the arg-max at its position
};

// Scores every request (in float64 from the logits); `batch` sequences per forward pass. Throws DataError when a
// continuation alone does not fit in the model's context.
std::vector<LlResult> score_requests(GPT& model, const std::vector<EncodedRequest>& requests, int64_t batch);

}  // namespace fwlab
