#include "text/batches/mqar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace fwlab {

void draw_distinct(std::vector<int32_t>& pool, int64_t n, std::mt19937_64& rng) {
  for (int64_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<size_t> pick(static_cast<size_t>(i), pool.size() - 1);
    std::swap(pool[static_cast<size_t>(i)], pool[pick(rng)]);
  }
}

// As Zoology's multiquery_ar: keys and values each drawn without replacement, the query slots hold the key and
// then a filler token (the answer is never shown), and every non-pair, non-query token is uniform over [0, V).
// Keys come from [1, V/2) rather than Zoology's [0, V/2) (NOTES.md), which changes nothing a model can learn.
TaskBatch make_mqar_batch(const MqarSpec& s, int64_t batch, uint64_t seed) {
  validate_mqar(s);
  std::mt19937_64 rng(seed);
  const int64_t L = s.seq_len, n = s.pairs, half = s.vocab / 2;
  const int64_t region = L + 1 - 2 * n, slots = region / 2;
  std::vector<double> slot_weight(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i)
    slot_weight[static_cast<size_t>(i)] = std::pow(static_cast<double>(i + 1), s.power_a - 1.0);

  TaskBatch b;
  b.batch = batch;
  b.len = L;
  b.inputs.resize(static_cast<size_t>(batch * L));
  b.targets.assign(static_cast<size_t>(batch * L), -1);
  std::vector<int32_t> keys(static_cast<size_t>(half - 1)), values(static_cast<size_t>(s.vocab - half));
  std::uniform_int_distribution<int32_t> noise(0, static_cast<int32_t>(s.vocab - 1));
  for (int64_t r = 0; r < batch; ++r) {
    std::iota(keys.begin(), keys.end(), 1);
    std::iota(values.begin(), values.end(), static_cast<int32_t>(half));
    draw_distinct(keys, n, rng);  // the first n are this row's keys and values
    draw_distinct(values, n, rng);
    std::vector<int32_t> seq(static_cast<size_t>(L + 1));
    for (int64_t i = 0; i < n; ++i) {
      seq[static_cast<size_t>(2 * i)] = keys[static_cast<size_t>(i)];
      seq[static_cast<size_t>(2 * i + 1)] = values[static_cast<size_t>(i)];
    }
    for (int64_t p = 2 * n; p <= L; ++p) seq[static_cast<size_t>(p)] = noise(rng);  // non-query filler
    // n distinct query slots, drawn one by one with probability ~ (slot + 1)^(a - 1) among those left.
    auto weights = slot_weight;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);  // which key is asked in which slot
    for (int64_t q = 0; q < n; ++q) {
      std::discrete_distribution<int64_t> pick(weights.begin(), weights.end());
      const int64_t slot = pick(rng);
      weights[static_cast<size_t>(slot)] = 0.0;
      const int64_t pos = 2 * n + 2 * slot, which = order[static_cast<size_t>(q)];
      seq[static_cast<size_t>(pos)] = keys[static_cast<size_t>(which)];  // pos + 1 keeps its filler
      b.targets[static_cast<size_t>(r * L + pos)] = values[static_cast<size_t>(which)];
    }
    for (int64_t p = 0; p < L; ++p) b.inputs[static_cast<size_t>(r * L + p)] = seq[static_cast<size_t>(p)];
  }
  return b;
}

}  // namespace fwlab
