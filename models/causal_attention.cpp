// Causal softmax attention on CPU, one block of queries at a time (see mixers.h).
#include <algorithm>
#include <vector>

#include "models/mixers.h"

namespace fwlab {

torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  int64_t window, Dropout& drop) {
  return torch::matmul(drop(softmax_weights(q, k, window)), v);
}

// Query block [start, end) reads keys [first, end): the queries are the last ones of that key range, which is
// what softmax_weights expects, so its mask (and window) applies to the block unchanged.
torch::Tensor blocked_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       int64_t window, Dropout& drop, int64_t block) {
  const int64_t T = q.size(2);
  if (T <= block || k.size(2) != T) return attention_reference(q, k, v, window, drop);
  std::vector<torch::Tensor> out;
  for (int64_t start = 0; start < T; start += block) {
    const int64_t end = std::min(T, start + block);
    const int64_t first = window > 0 ? std::max<int64_t>(0, start - window + 1) : 0;
    auto keys = k.narrow(2, first, end - first), values = v.narrow(2, first, end - first);
    out.push_back(attention_reference(q.narrow(2, start, end - start), keys, values, window, drop));
  }
  return torch::cat(out, 2);
}

}  // namespace fwlab
