// The associative retrieval task of Schlag et al. 2021 ("Linear Transformers Are Secretly Fast Weight
// Programmers", §4.1, setting 1: capacity), as a job key (data.retrieval): checked by the harness before a sweep,
// used by the worker. A sequence is `pairs` key-value pairs, each presented as one token, then the query (or
// several); only the answers are scored. One layer can solve it without learning positions: the key and value of a pair
// arrive together, as in the paper, where each input is the concatenation of a key and a value embedding.
#pragma once

#include <cstdint>

namespace fwlab {

struct RetrievalSpec {
  int64_t keys = 16;  // K: the key alphabet; a sequence's keys are distinct
  int64_t values =
      16;  // V: the value alphabet; a sequence's values are distinct (the paper draws both without replacement)
  int64_t pairs = 4;  // S: pairs per sequence, the memory load
  // Queries after the pairs, each a distinct key of the sequence (1: the paper's one query; 0: every key, in a
  // random order). More queries give more labels per sequence (the paper evaluates every key, one sequence each);
  // a causal model reads each after the ones before it, so a fast-weight layer must learn not to overwrite its
  // memory with the query tokens.
  int64_t queries = 1;

  int64_t asked() const { return queries > 0 ? queries : pairs; }

  // Token layout: [0, K) query tokens, [K, K + V) value tokens (the answers), then one token per (key, value).
  int64_t query_token(int64_t key) const { return key; }
  int64_t value_token(int64_t value) const { return keys + value; }
  int64_t pair_token(int64_t key, int64_t value) const { return keys + values + key * values + value; }
  int64_t vocab() const { return keys + values + keys * values; }
  int64_t seq_len() const { return pairs + asked(); }
};

// Throws std::invalid_argument naming the field ("retrieval.pairs: ...") when the spec cannot be generated.
void validate_retrieval(const RetrievalSpec& spec);

}  // namespace fwlab
