#include "text/batches/retrieval.h"

#include <numeric>
#include <random>

namespace fwlab {

TaskBatch make_retrieval_batch(const RetrievalSpec& s, int64_t batch, uint64_t seed) {
  validate_retrieval(s);
  std::mt19937_64 rng(seed);
  const int64_t S = s.pairs, L = s.seq_len();
  TaskBatch b;
  b.batch = batch;
  b.len = L;
  b.inputs.resize(static_cast<size_t>(batch * L));
  b.targets.assign(static_cast<size_t>(batch * L), -1);
  std::vector<int32_t> keys(static_cast<size_t>(s.keys)), values(static_cast<size_t>(s.values)),
      asked(static_cast<size_t>(S));
  for (int64_t r = 0; r < batch; ++r) {
    std::iota(keys.begin(), keys.end(), 0);
    std::iota(values.begin(), values.end(), 0);
    draw_distinct(keys, S, rng);  // the first S are this row's keys and values
    draw_distinct(values, S, rng);
    int32_t* row = b.inputs.data() + r * L;
    for (size_t i = 0; i < static_cast<size_t>(S); ++i) row[i] = static_cast<int32_t>(s.pair_token(keys[i], values[i]));
    std::iota(asked.begin(), asked.end(), 0);
    draw_distinct(asked, s.asked(), rng);  // which pairs are asked, in the order asked
    for (int64_t q = 0; q < s.asked(); ++q) {
      const auto i = static_cast<size_t>(asked[static_cast<size_t>(q)]);
      row[S + q] = static_cast<int32_t>(s.query_token(keys[i]));
      b.targets[static_cast<size_t>(r * L + S + q)] = static_cast<int32_t>(s.value_token(values[i]));
    }
  }
  return b;
}

}  // namespace fwlab
