#include "models/rope.h"

#include <cmath>

namespace fwlab {

namespace {

// Llama 3.1's scaling (Hugging Face's _compute_llama3_parameters): wavelengths longer than the original context /
// low_freq_factor are divided by `factor`, shorter than original / high_freq_factor kept, and those between
// interpolated by s = (original / wavelength - low) / (high - low).
double llama3_scaled(double inv, const RopeSpec& r) {
  const double pi = 3.14159265358979323846, wavelength = 2.0 * pi / inv;
  const double low_wavelength = static_cast<double>(r.original_context) / r.low_freq_factor;
  const double high_wavelength = static_cast<double>(r.original_context) / r.high_freq_factor;
  if (wavelength > low_wavelength) return inv / r.factor;
  if (wavelength < high_wavelength) return inv;
  const double s = (static_cast<double>(r.original_context) / wavelength - r.low_freq_factor) /
                   (r.high_freq_factor - r.low_freq_factor);
  return (1.0 - s) * inv / r.factor + s * inv;
}

}  // namespace

std::vector<double> rope_frequencies(const RopeSpec& spec, int64_t head_dim) {
  std::vector<double> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double inv = 1.0 / std::pow(spec.theta, static_cast<double>(i) / static_cast<double>(head_dim));
    out.push_back(spec.scaling == "linear"   ? inv / spec.factor
                  : spec.scaling == "llama3" ? llama3_scaled(inv, spec)
                                             : inv);
  }
  return out;
}

Rope::Rope(const RopeSpec& spec, int64_t head_dim) : inv_freq_(rope_frequencies(spec, head_dim)) {}

torch::Tensor Rope::apply(const torch::Tensor& x, int64_t position) const {
  const int64_t T = x.size(-2), half = x.size(-1) / 2;
  const auto f64 = x.options().dtype(torch::kFloat64);
  auto inv = torch::tensor(inv_freq_, torch::kFloat64).to(x.device());
  auto freqs = torch::outer(torch::arange(position, position + T, f64), inv);  // [T, hd/2]
  auto angles = torch::cat({freqs, freqs}, -1);
  auto cos = angles.cos().to(x.scalar_type()), sin = angles.sin().to(x.scalar_type());
  auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);  // rotate_half
  return x * cos + rotated * sin;
}

}  // namespace fwlab
