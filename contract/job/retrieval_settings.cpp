#include "contract/job/retrieval_settings.h"

#include <fmt/format.h>

#include <stdexcept>

namespace fwlab {

void validate_retrieval(const RetrievalSpec& s) {
  constexpr int64_t kMaxAlphabet = 4096;  // K * V pair tokens: 4096^2 is already a 16M-row embedding
  if (s.keys < 1 || s.keys > kMaxAlphabet)
    throw std::invalid_argument(fmt::format("retrieval.keys: must be in [1, {}], got {}", kMaxAlphabet, s.keys));
  if (s.values < 2 || s.values > kMaxAlphabet)
    throw std::invalid_argument(fmt::format("retrieval.values: must be in [2, {}], got {}", kMaxAlphabet, s.values));
  if (s.pairs < 1) throw std::invalid_argument(fmt::format("retrieval.pairs: must be >= 1, got {}", s.pairs));
  if (s.pairs > s.keys)
    throw std::invalid_argument(
        fmt::format("retrieval.pairs: {} distinct keys do not fit in keys = {}", s.pairs, s.keys));
  if (s.queries < 0 || s.queries > s.pairs)
    throw std::invalid_argument(
        fmt::format("retrieval.queries: must be in [0, pairs = {}] (each asks a distinct key; 0: all), got {}", s.pairs,
                    s.queries));
  if (s.pairs > s.values)
    throw std::invalid_argument(
        fmt::format("retrieval.pairs: {} distinct values do not fit in values = {}", s.pairs, s.values));
}

}  // namespace fwlab
