// The MQAR task's settings (a job key, data.mqar): checked by the harness before a sweep, used by the worker.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace fwlab {

// One (sequence length, pairs) point of the task; `weight`: its share of a training mix.
struct MqarPoint {
  int64_t seq_len = 64, pairs = 4;
  double weight = 1.0;
};

struct MqarSpec {
  int64_t vocab = 256;    // keys from [1, V/2), values from [V/2, V)
  int64_t seq_len = 64;   // model input length L
  int64_t pairs = 4;      // n
  double power_a = 0.01;  // query gaps ~ i^(a-1)
  // Zoology trains on a mix of points and tests on others (its figure 2: five training points from (64, 4) to
  // (256, 64), seven test points to (1024, 256)). mix: [[L, n, weight], ...], each training batch at one point drawn
  // with probability ~ weight (its first point is (seq_len, pairs)); test_points: [[L, n], ...], evaluation
  // batches taken in turn from each. Both empty: every batch at (seq_len, pairs).
  std::vector<MqarPoint> mix, test_points;

  MqarSpec at(const MqarPoint& point) const;   // this task at another point
  MqarPoint train_point(uint64_t seed) const;  // the point of the training batch drawn with `seed`
  std::vector<MqarPoint> eval_points() const;  // test_points, else the mix's points, else (seq_len, pairs)
  int64_t longest() const;                     // the longest sequence a job feeds its model
};

// Throws std::invalid_argument naming the field when the spec cannot hold its pairs.
void validate_mqar(const MqarSpec& spec);

// [[L, n, weight], ...] (weighted) or [[L, n], ...] from job.json; std::invalid_argument naming `field` otherwise.
std::vector<MqarPoint> mqar_points_from_json(const nlohmann::json& j, bool weighted, const std::string& field);

}  // namespace fwlab
