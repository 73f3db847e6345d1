// Greedy generation for evaluation tasks (passkey, recall extraction), batched, through the models' step forms:
// a recurrent model carries its constant-size state, softmax layers their KV cache. Prompts of different lengths
// share a batch without padding: at step t every row consumes its own t-th token (still its prompt, or already
// its last generated token), so each row's state is exactly its own sequence's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

struct GreedyOptions {
  int64_t max_new_tokens = 48;
  std::string
      stop;  // generation of a row ends once its decoded text holds this ("" : never); the text is cut before it
  int64_t batch = 16;
};

// The generated text of each prompt. Prompts longer than the model's context less max_new_tokens keep their last
// tokens (lm-eval's generate_until truncates the same way).
std::vector<std::string> greedy_until(GPT& model, const Tokenizer& tok,
                                      const std::vector<std::vector<int64_t>>& prompts, const GreedyOptions& options);

}  // namespace fwlab
