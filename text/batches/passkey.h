// Passkey retrieval (landmark-attention's run_test.py, as LongLoRA and LoLCATs use it): an instruction, filler, a
// key sentence at a given depth, more filler, and the question; the model must answer the 1..50000 key greedily.
// Built in tokens so that a prompt has exactly the length asked for: the pieces are encoded apart (without
// special tokens) and joined, after the tokenizer's own leading special tokens (a Llama BOS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizers/tokenizer.h"

namespace fwlab {

struct PasskeyPrompt {
  std::vector<int64_t> ids;
  int64_t key = 0;
  int64_t key_at = 0;         // index of the key sentence's first token
  int64_t filler_from = 0;    // the filler's first token
  int64_t filler_tokens = 0;  // filler tokens in all (before + after the key)
};

// The filler's token stream: landmark's five sentences repeated ("repeat"), or the text given (the corpus).
std::vector<int64_t> passkey_filler(const Tokenizer& tok, const std::string& text);

// A prompt of `length` tokens with the key sentence after round(depth% of the filler) filler tokens; filler is
// taken from `filler` starting at `offset` (wrapping around). Throws std::invalid_argument when `length` leaves
// no room for filler.
PasskeyPrompt passkey_prompt(const Tokenizer& tok, const std::vector<int64_t>& filler, int64_t length,
                             int64_t depth_percent, int64_t key, int64_t offset);

// The answer is right when the first run of digits in the generated text is the key (landmark's regex scoring;
// LongLoRA's token comparison breaks with BPE, which splits numbers differently in context).
bool passkey_correct(const std::string& generated, int64_t key);

}  // namespace fwlab
