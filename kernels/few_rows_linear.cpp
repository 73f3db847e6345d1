#include "kernels/few_rows_linear.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <algorithm>

#include "kernels/common/recurrence.h"
#include "kernels/common/lane_dot.h"

namespace fwlab::kernels {
namespace {

struct RowsProduct {
  int64_t rows, n, k;
};

// One x row against kWeightRows weight rows (x read once for them all); 16 partial sums a row, which the compiler keeps
// in registers. Eight rows streamed at once read the weights ~10 % faster than four, two ~20 % slower (measured at
// the quick generation model's sizes, two threads).
constexpr int kWeightRows = 8;

template <typename T>
FWLAB_HOT void block_dots(const T* x, const T* w, int64_t k, T* out) {
  T acc[kWeightRows][16] = {};
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int r = 0; r < kWeightRows; ++r)
      for (int j = 0; j < 16; ++j) acc[r][j] += w[r * k + i + j] * x[i + j];
  for (int r = 0; r < kWeightRows; ++r) {
    T sum = 0;
    for (int64_t t = i; t < k; ++t) sum += w[r * k + t] * x[t];
    for (int j = 0; j < 16; ++j) sum += acc[r][j];
    out[r] = sum;
  }
}

// Outputs [n0, n1) of every row: weight rows kWeightRows at a time, each block used by all rows while it is in L1.
template <typename T>
FWLAB_HOT void output_range(const T* x, const T* w, const T* b, T* y, const RowsProduct& p, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + kWeightRows <= n1; n += kWeightRows)
    for (int64_t r = 0; r < p.rows; ++r) {
      T* out = y + r * p.n + n;
      block_dots(x + r * p.k, w + n * p.k, p.k, out);
      if (b)
        for (int j = 0; j < kWeightRows; ++j) out[j] += b[n + j];
    }
  for (; n < n1; ++n)
    for (int64_t r = 0; r < p.rows; ++r) y[r * p.n + n] = lane_dot(x + r * p.k, w + n * p.k, p.k) + (b ? b[n] : T(0));
}

FWLAB_VECTOR_CLONES void output_range_entry(const float* x, const float* w, const float* b, float* y,
                                            const RowsProduct& p, int64_t n0, int64_t n1) {
  output_range(x, w, b, y, p, n0, n1);
}
FWLAB_VECTOR_CLONES void output_range_entry(const double* x, const double* w, const double* b, double* y,
                                            const RowsProduct& p, int64_t n0, int64_t n1) {
  output_range(x, w, b, y, p, n0, n1);
}

template <typename T>
void run_loop(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& y) {
  const RowsProduct p{x.numel() / w.size(1), w.size(0), w.size(1)};
  const T* xp = x.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  const T* bp = b.defined() ? b.data_ptr<T>() : nullptr;
  T* yp = y.data_ptr<T>();
  // A task streams at least ~16k weights: below that a fork and join costs more than the second core gives.
  const int64_t grain = std::max<int64_t>(
      kWeightRows, ((int64_t{1} << 14) / std::max<int64_t>(p.k, 1) + kWeightRows - 1) / kWeightRows * kWeightRows);
  at::parallel_for(0, p.n, grain, [&](int64_t n0, int64_t n1) { output_range_entry(xp, wp, bp, yp, p, n0, n1); });
}

}  // namespace

bool few_rows_loop_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const auto dtype = x.scalar_type();
  const auto matches = [&](const torch::Tensor& t) {
    return !t.defined() || (t.is_cpu() && t.scalar_type() == dtype && t.is_contiguous());
  };
  return x.is_cpu() && (dtype == torch::kFloat32 || dtype == torch::kFloat64) && x.dim() >= 1 && weight.dim() == 2 &&
         x.size(-1) == weight.size(1) && x.numel() > 0 && x.numel() / x.size(-1) <= kFewRows && matches(weight) &&
         matches(bias) && (!bias.defined() || bias.dim() == 1) && !at::autocast::is_cpu_enabled() &&
         !gradients_needed({x, weight, bias});
}

torch::Tensor few_rows_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!few_rows_loop_applies(x, weight, bias)) return torch::linear(x, weight, bias);
  const auto rows = x.contiguous();  // read as [x.numel() / K, K]: no reshape or view, each a dispatched op
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  auto y = torch::empty(sizes, x.options());
  if (x.scalar_type() == torch::kFloat32)
    run_loop<float>(rows, weight, bias, y);
  else
    run_loop<double>(rows, weight, bias, y);
  return y;
}

}  // namespace fwlab::kernels
