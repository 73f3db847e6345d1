#include "contract/job/mqar_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace fwlab {

namespace {

// One point's own limits; `field` names where it came from in errors.
void validate_point(const MqarSpec& s, const std::string& field) {
  if (s.seq_len > (int64_t{1} << 24))
    throw std::invalid_argument(fmt::format("mqar.{}: {} is beyond what fwlab supports (at most {})",
                                            field.empty() ? "seq_len" : field, s.seq_len, int64_t{1} << 24));
  if (s.pairs < 1)
    throw std::invalid_argument(fmt::format("mqar.{}: must be >= 1, got {}", field.empty() ? "pairs" : field, s.pairs));
  if (s.pairs > s.vocab / 2 - 1)
    throw std::invalid_argument(fmt::format("mqar.{}: {} distinct keys do not fit in [1, vocab/2) = [1, {})",
                                            field.empty() ? "pairs" : field, s.pairs, s.vocab / 2));
  // The sequence (L + 1 tokens) holds the 2n-token context and n query slots of two tokens each.
  if ((s.seq_len + 1 - 2 * s.pairs) / 2 < s.pairs)
    throw std::invalid_argument(fmt::format("mqar.{}: {} is too short for {} pairs and their queries (needs >= {})",
                                            field.empty() ? "seq_len" : field, s.seq_len, s.pairs, 4 * s.pairs - 1));
}

}  // namespace

void validate_mqar(const MqarSpec& s) {
  if (s.vocab < 8) throw std::invalid_argument(fmt::format("mqar.vocab: must be >= 8, got {}", s.vocab));
  if (s.vocab > (int64_t{1} << 24))
    throw std::invalid_argument(
        fmt::format("mqar.vocab: {} is beyond what fwlab supports (at most {})", s.vocab, int64_t{1} << 24));
  validate_point(s, "");
  if (!(s.power_a > 0.0 && s.power_a <= 1.0))
    throw std::invalid_argument(fmt::format("mqar.power_a: must be in (0, 1], got {}", s.power_a));
  for (size_t i = 0; i < s.mix.size(); ++i) {
    validate_point(s.at(s.mix[i]), fmt::format("mix[{}]", i));
    if (!(s.mix[i].weight > 0.0))
      throw std::invalid_argument(fmt::format("mqar.mix[{}]: its weight must be positive, got {}", i, s.mix[i].weight));
  }
  // A mix names its first point twice (seq_len, pairs): they must agree, or one of them would silently not apply.
  if (!s.mix.empty() && (s.mix[0].seq_len != s.seq_len || s.mix[0].pairs != s.pairs))
    throw std::invalid_argument(fmt::format(
        "mqar.mix: its first point ({}, {}) differs from seq_len = {} and pairs = {}, which name the first point",
        s.mix[0].seq_len, s.mix[0].pairs, s.seq_len, s.pairs));
  for (size_t i = 0; i < s.test_points.size(); ++i)
    validate_point(s.at(s.test_points[i]), fmt::format("test_points[{}]", i));
}

MqarSpec MqarSpec::at(const MqarPoint& point) const {
  MqarSpec s = *this;
  s.seq_len = point.seq_len, s.pairs = point.pairs;
  s.mix.clear(), s.test_points.clear();
  return s;
}

MqarPoint MqarSpec::train_point(uint64_t seed) const {
  if (mix.empty()) return {seq_len, pairs, 1.0};
  std::vector<double> weights;
  for (const auto& p : mix) weights.push_back(p.weight);
  std::mt19937_64 rng(seed ^ 0x6d69782d706f696eULL);  // its own stream: the batch's own draws stay as they were
  return mix[static_cast<size_t>(std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng))];
}

std::vector<MqarPoint> MqarSpec::eval_points() const {
  if (!test_points.empty()) return test_points;
  if (!mix.empty()) return mix;
  return {{seq_len, pairs, 1.0}};
}

int64_t MqarSpec::longest() const {
  int64_t L = seq_len;
  for (const auto& p : mix) L = std::max(L, p.seq_len);
  for (const auto& p : test_points) L = std::max(L, p.seq_len);
  return L;
}

std::vector<MqarPoint> mqar_points_from_json(const nlohmann::json& j, bool weighted, const std::string& field) {
  const auto shape = weighted ? "[[seq_len, pairs, weight], ...]" : "[[seq_len, pairs], ...]";
  const auto bad = [&] {
    return std::invalid_argument(fmt::format("mqar.{}: must be {}, got {}", field, shape, j.dump()));
  };
  if (!j.is_array()) throw bad();
  std::vector<MqarPoint> out;
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != (weighted ? 3u : 2u) || !e[0].is_number_integer() || !e[1].is_number_integer() ||
        (weighted && !e[2].is_number()))
      throw bad();
    out.push_back({e[0].get<int64_t>(), e[1].get<int64_t>(), weighted ? e[2].get<double>() : 1.0});
  }
  return out;
}

}  // namespace fwlab
