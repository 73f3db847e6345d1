// Decoding a batch of sources with an encoder-decoder: the model's step form (a KV cache for softmax self
// attention, the constant-size state of a converted decoder, the cross memory computed once per source) behind
// the search of models/seq2seq/beam_search.h.
#pragma once

#include "models/seq2seq/beam_search.h"
#include "models/seq2seq/seq2seq.h"

namespace fwlab {

// src [B, S] padded with Seq2SeqImpl::kPad; beam 1 decodes greedily. No gradients, the model's current mode.
std::vector<Hypothesis> translate(Seq2Seq& model, const torch::Tensor& src, const BeamOptions& options);

}  // namespace fwlab
