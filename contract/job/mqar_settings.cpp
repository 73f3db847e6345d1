#include "contract/job/mqar_settings.h"

#include <fmt/format.h>

#include <stdexcept>

namespace fwlab {

void validate_mqar(const MqarSpec& s) {
  if (s.vocab < 8) throw std::invalid_argument(fmt::format("mqar.vocab: must be >= 8, got {}", s.vocab));
  if (s.vocab > (int64_t{1} << 24))
    throw std::invalid_argument(
        fmt::format("mqar.vocab: {} is beyond what fwlab supports (at most {})", s.vocab, int64_t{1} << 24));
  if (s.seq_len > (int64_t{1} << 24))
    throw std::invalid_argument(
        fmt::format("mqar.seq_len: {} is beyond what fwlab supports (at most {})", s.seq_len, int64_t{1} << 24));
  if (s.pairs < 1) throw std::invalid_argument(fmt::format("mqar.pairs: must be >= 1, got {}", s.pairs));
  if (s.pairs > s.vocab / 2 - 1)
    throw std::invalid_argument(
        fmt::format("mqar.pairs: {} distinct keys do not fit in [1, vocab/2) = [1, {})", s.pairs, s.vocab / 2));
  // The sequence (L + 1 tokens) holds the 2n-token context and n query slots of two tokens each.
  if ((s.seq_len + 1 - 2 * s.pairs) / 2 < s.pairs)
    throw std::invalid_argument(
        fmt::format("mqar.seq_len: {} is too short for {} pairs and their queries (needs >= {})", s.seq_len, s.pairs,
                    4 * s.pairs - 1));
  if (!(s.power_a > 0.0 && s.power_a <= 1.0))
    throw std::invalid_argument(fmt::format("mqar.power_a: must be in (0, 1], got {}", s.power_a));
}

}  // namespace fwlab
