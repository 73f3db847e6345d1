// What the host TSan programs (tests/tsan/) share: their random inputs, and the tally of their checks (each printed
// as it is made, the count at the end, the exit status ctest reads). Header-only: each program is one translation
// unit.
#pragma once

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace fwlab::tsan {

// Normal draws from a fixed seed: one at a time, or n of them times a scale.
class Normals {
 public:
  explicit Normals(uint32_t seed) : rng_(seed) {}
  double next() { return normal_(rng_); }
  std::vector<double> operator()(int64_t n, double scale) {
    std::vector<double> x(static_cast<size_t>(n));
    for (auto& e : x) e = next() * scale;
    return x;
  }

 private:
  std::mt19937 rng_;
  std::normal_distribution<double> normal_;
};

class Expectations {
 public:
  void expect(bool ok, const char* what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    (ok ? passed_ : failed_) += 1;
  }
  int finish() const {
    std::printf("%d passed, %d failed\n", passed_, failed_);
    return failed_ ? 1 : 0;
  }

 private:
  int passed_ = 0, failed_ = 0;
};

}  // namespace fwlab::tsan
