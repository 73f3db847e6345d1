// kernels/few_rows_linear.h against its twin, torch::linear: the same products where its own loop runs (weight
// rows not a multiple of four, inputs not a multiple of sixteen, rows split over two threads, 3-D inputs, views),
// and torch::linear itself wherever the loop must not run (gradients, autocast, more rows, other dtypes, layouts).
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <catch2/catch.hpp>

#include "kernels/few_rows_linear.h"
#include "tests/test_util.h"

namespace K = fwlab::kernels;

namespace {

struct Shape {
  int64_t rows, n, k;
};

// The loop's product against libtorch's in float64, for x of `rows` rows, as [rows, k] and as [rows, 1, k].
void check_loop(const Shape& s, torch::ScalarType dtype, bool bias, double tol) {
  const auto opt = torch::TensorOptions().dtype(dtype);
  const auto w = torch::randn({s.n, s.k}, opt), b = bias ? torch::randn({s.n}, opt) : torch::Tensor();
  const auto wide = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat64) : t; };
  for (const auto& x :
       {torch::randn({s.rows, s.k}, opt), torch::randn({s.rows, 1, s.k}, opt), torch::randn({s.k, s.rows}, opt).t()}) {
    INFO("rows " << s.rows << ", n " << s.n << ", k " << s.k << ", x " << x.sizes() << ", bias " << bias);
    REQUIRE(K::few_rows_loop_applies(x, w, b));
    const auto y = K::few_rows_linear(x, w, b);
    const auto ref = torch::linear(wide(x), wide(w), wide(b));
    REQUIRE(y.sizes() == ref.sizes());
    REQUIRE(y.scalar_type() == dtype);
    CHECK((y.to(torch::kFloat64) - ref).abs().max().item<double>() <= tol * (1.0 + ref.abs().max().item<double>()));
  }
}

// Where the loop must not run: the result is torch::linear's, bit for bit.
void check_twin_itself(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  REQUIRE_FALSE(K::few_rows_loop_applies(x, w, b));
  CHECK(torch::equal(K::few_rows_linear(x, w, b), torch::linear(x, w, b)));
}

}  // namespace

TEST_CASE("few-rows linear: its own loop == torch::linear, float64 and float32, one and two threads", "[kernels]") {
  torch::manual_seed(7);
  torch::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  const std::vector<Shape> shapes{{1, 768, 256}, {4, 1027, 64}, {3, 37, 45}, {2, 5, 16}, {1, 1, 1}, {4, 3, 17}};
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    for (const auto& s : shapes)
      for (bool bias : {true, false}) {
        check_loop(s, torch::kFloat64, bias, 1e-12);
        check_loop(s, torch::kFloat32, bias, 1e-5);
      }
  }
  at::set_num_threads(threads);
}

TEST_CASE("few-rows linear: gradients, autocast, many rows, other dtypes and layouts are torch::linear itself",
          "[kernels]") {
  torch::manual_seed(8);
  const auto w = torch::randn({6, 8}), b = torch::randn({6}), x = torch::randn({2, 8});
  {
    torch::NoGradGuard no_grad;
    check_twin_itself(torch::randn({K::kFewRows + 1, 8}), w, b);
    check_twin_itself(torch::randn({3, 2, 8}), w, b);  // six rows in all
    check_twin_itself(x.to(torch::kBFloat16), w.to(torch::kBFloat16), b.to(torch::kBFloat16));
    check_twin_itself(x, torch::randn({8, 6}).t(), b);  // a transposed weight: rows not contiguous
    check_twin_itself(x, w, torch::randn({12}).slice(0, 0, 12, 2));
    at::autocast::set_cpu_enabled(true);
    const bool applies = K::few_rows_loop_applies(x, w, b);
    at::autocast::set_cpu_enabled(false);
    CHECK_FALSE(applies);
  }
  const auto trained = w.clone().requires_grad_(true);
  REQUIRE_FALSE(K::few_rows_loop_applies(x, trained, b));
  K::few_rows_linear(x, trained, b).sum().backward();
  REQUIRE(trained.grad().defined());
  CHECK(torch::allclose(trained.grad(), x.sum(0).expand({6, 8})));  // d(sum y)/dW[n, k] = sum over rows of x[., k]
}
