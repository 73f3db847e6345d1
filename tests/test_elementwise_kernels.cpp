// The small-model kernels against their twins, libtorch's own ops: exp_approx against std::exp; gelu_tanh against
// torch::gelu(x, "tanh"); causal_conv_cpu against the grouped conv1d and the sum of shifted copies of
// models/short_conv.h; cross_entropy_mean, and the output layer fused with it (linear_cross_entropy_mean), against
// torch's cross_entropy (of torch::linear). Values and gradients, float64 (tight) and
// float32 (a few ulp), one and two threads.
#include <ATen/Parallel.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cross_entropy/cross_entropy_cpu.h"
#include "kernels/cross_entropy/linear_cross_entropy_cpu.h"
#include "kernels/elementwise/exp_approx.h"
#include "kernels/elementwise/gelu_tanh.h"
#include "kernels/optim/adamw_cpu.h"
#include "kernels/short_conv/causal_conv_cpu.h"

namespace K = fwlab::kernels;

namespace {

double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  const auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  return ((a64 - b64).abs().max() / (1.0 + b64.abs().max())).item<double>();
}

// Each input's gradient under f and under its twin g, for the same upstream gradient.
std::vector<std::pair<torch::Tensor, torch::Tensor>> grads_of(
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& g, const std::vector<torch::Tensor>& in) {
  std::vector<torch::Tensor> a, b;
  for (const auto& t : in) {
    a.push_back(t.defined() ? t.detach().clone().requires_grad_(true) : t);
    b.push_back(t.defined() ? t.detach().clone().requires_grad_(true) : t);
  }
  const auto ya = f(a), yb = g(b);
  const auto up = torch::randn_like(yb);
  (ya * up).sum().backward();
  (yb * up).sum().backward();
  std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].defined()) out.emplace_back(a[i].grad(), b[i].grad());
  return out;
}

}  // namespace

TEST_CASE("exp_approx: within 2 ulp of std::exp on [-87, 88], clamped outside, NaN kept", "[kernels]") {
  double worst = 0.0;
  for (double x = -87.0; x <= 88.0; x += 0.0137) {
    const auto xf = static_cast<float>(x);
    const float exact = static_cast<float>(std::exp(static_cast<double>(xf)));
    const double ulp = std::nextafter(exact, INFINITY) - exact;
    worst =
        std::max(worst, std::fabs(static_cast<double>(K::exp_approx(xf)) - std::exp(static_cast<double>(xf))) / ulp);
  }
  CHECK(worst <= 2.0);
  CHECK(K::exp_approx(0.0f) == 1.0f);
  CHECK(std::isnan(K::exp_approx(NAN)));
  CHECK(K::exp_approx(-1000.0f) == Approx(std::exp(-87.0f)).epsilon(1e-6));
  CHECK(K::exp_approx(1000.0f) == Approx(std::exp(88.0f)).epsilon(1e-6));
}

TEST_CASE("gelu_tanh == torch::gelu(x, tanh): values and gradients, float64 and float32", "[kernels]") {
  torch::manual_seed(3);
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    for (int64_t n : {1, 17, 70000}) {
      auto x = torch::randn({n}, torch::kFloat64) * 4;
      x.index_put_({0}, -30.0);  // the tails: e^{-2z} far out of float range both ways
      if (n > 1) x.index_put_({1}, 25.0);
      INFO("n " << n << ", threads " << t);
      REQUIRE(K::gelu_tanh_loop_applies(x));
      CHECK(max_rel_diff(K::gelu_tanh(x), torch::gelu(x, "tanh")) < 1e-13);
      CHECK(max_rel_diff(K::gelu_tanh(x.to(torch::kFloat)), torch::gelu(x, "tanh")) < 3e-7);
      const auto f = [](const std::vector<torch::Tensor>& v) { return K::gelu_tanh(v[0]); };
      const auto g = [](const std::vector<torch::Tensor>& v) { return torch::gelu(v[0], "tanh"); };
      for (const auto& [mine, twin] : grads_of(f, g, {x})) CHECK(max_rel_diff(mine, twin) < 1e-13);
      // float32 against the float64 twin: torch's float32 gelu is itself ~1e-6 off.
      const auto xf = x.to(torch::kFloat).requires_grad_(true);
      const auto x64 = xf.detach().to(torch::kFloat64).requires_grad_(true), up = torch::randn_like(x64);
      (K::gelu_tanh(xf) * up.to(torch::kFloat)).sum().backward();
      (torch::gelu(x64, "tanh") * up).sum().backward();
      CHECK(max_rel_diff(xf.grad(), x64.grad()) < 2e-6);
    }
  }
  at::set_num_threads(threads);
  const auto nan = torch::full({3}, NAN);
  CHECK(torch::isnan(K::gelu_tanh(nan)).all().item<bool>());
  const auto half = torch::randn({5}).to(torch::kBFloat16);  // not its loop: the twin itself
  CHECK_FALSE(K::gelu_tanh_loop_applies(half));
  CHECK(torch::equal(K::gelu_tanh(half), torch::gelu(half, "tanh")));
}

namespace {

// The convolution as libtorch's grouped conv1d over [B, C, T] with K - 1 zeros in front.
torch::Tensor conv1d_twin(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool silu) {
  const int64_t K = w.size(2), C = x.size(2);
  auto padded = torch::constant_pad_nd(x.transpose(1, 2), {K - 1, 0});
  auto y = torch::conv1d(padded, w, b, torch::IntArrayRef{1}, torch::IntArrayRef{0}, torch::IntArrayRef{1}, C)
               .transpose(1, 2);
  return silu ? torch::silu(y) : y;
}

}  // namespace

TEST_CASE("causal_conv_cpu == grouped conv1d: values and every gradient, float64 and float32", "[kernels]") {
  torch::manual_seed(5);
  const int threads = at::get_num_threads();
  struct Case {
    int64_t B, T, C, K;
  };
  for (int t : {1, 2})
    for (const auto& c : {Case{3, 9, 20, 4}, Case{1, 2, 5, 4}, Case{4, 7, 33, 1}, Case{2, 16, 8, 3}})
      for (bool silu : {true, false})
        for (bool bias : {true, false}) {
          at::set_num_threads(t);
          INFO("B " << c.B << " T " << c.T << " C " << c.C << " K " << c.K << " silu " << silu << " bias " << bias
                    << " threads " << t);
          const auto x = torch::randn({c.B, c.T, c.C}, torch::kFloat64),
                     w = torch::randn({c.C, 1, c.K}, torch::kFloat64);
          const auto b = bias ? torch::randn({c.C}, torch::kFloat64) : torch::Tensor();
          const auto f = [&](const std::vector<torch::Tensor>& v) {
            return K::causal_conv_cpu(v[0], v[1], v[2], silu);
          };
          const auto g = [&](const std::vector<torch::Tensor>& v) { return conv1d_twin(v[0], v[1], v[2], silu); };
          CHECK(max_rel_diff(f({x, w, b}), g({x, w, b})) < 1e-13);
          for (const auto& [mine, twin] : grads_of(f, g, {x, w, b})) CHECK(max_rel_diff(mine, twin) < 1e-12);
          const auto xf = x.to(torch::kFloat), wf = w.to(torch::kFloat), bf = bias ? b.to(torch::kFloat) : b;
          CHECK(max_rel_diff(f({xf, wf, bf}), g({x, w, b})) < 1e-6);
          for (const auto& [mine, twin] : grads_of(f, g, {xf, wf, bf})) CHECK(max_rel_diff(mine, twin) < 1e-5);
        }
  at::set_num_threads(threads);
  CHECK_FALSE(K::causal_conv_cpu_applies(torch::randn({1, 2, 3}).to(torch::kBFloat16)));
}

TEST_CASE("cross_entropy_mean == torch's cross_entropy: loss and gradient; NaN from a bad logit", "[kernels]") {
  torch::manual_seed(9);
  const int threads = at::get_num_threads();
  for (int t : {1, 2})
    for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {40, 1000}, {7, 8192}}) {
      at::set_num_threads(t);
      INFO("N " << N << " V " << V << " threads " << t);
      const auto logits = torch::randn({N, V}, torch::kFloat64) * 5, targets = torch::randint(0, V, {N});
      const auto f = [&](const std::vector<torch::Tensor>& v) { return K::cross_entropy_mean(v[0], targets); };
      const auto g = [&](const std::vector<torch::Tensor>& v) {
        return torch::nn::functional::cross_entropy(v[0], targets);
      };
      CHECK(max_rel_diff(f({logits}), g({logits})) < 1e-13);
      CHECK(max_rel_diff(f({logits.to(torch::kFloat)}), g({logits})) < 1e-6);
      for (const auto& [mine, twin] : grads_of(f, g, {logits})) CHECK(max_rel_diff(mine, twin) < 1e-13);
      for (const auto& [mine, twin] : grads_of(f, g, {logits.to(torch::kFloat)}))
        CHECK(max_rel_diff(mine, twin) < 1e-6);
    }
  at::set_num_threads(threads);
  auto bad = torch::randn({4, 10});
  bad.index_put_({2, 3}, INFINITY);
  CHECK(std::isnan(K::cross_entropy_mean(bad, torch::zeros({4}, torch::kLong)).item<double>()));
  bad.index_put_({2, 3}, NAN);
  CHECK(std::isnan(K::cross_entropy_mean(bad, torch::zeros({4}, torch::kLong)).item<double>()));
  CHECK_THROWS_WITH(K::cross_entropy_mean(torch::randn({2, 5}), torch::tensor({1, 5})),
                    Catch::Contains("target 5 of row 1 is no class of 5"));
}

TEST_CASE("linear_cross_entropy_mean == torch's cross_entropy of torch::linear: loss and both gradients", "[kernels]") {
  torch::manual_seed(10);
  const int threads = at::get_num_threads();
  // One block (rows of at most 256), three (the last short) of 256 rows, and three of 8 at a vocabulary so wide
  // that a block holds 8 rows; one and two threads (each adds into its own dL/dW).
  for (int t : {1, 2})
    for (auto [N, D, V] :
         {std::tuple<int64_t, int64_t, int64_t>{1, 8, 5}, {77, 64, 1000}, {600, 16, 1000}, {20, 4, 300000}}) {
      at::set_num_threads(t);
      INFO("N " << N << " D " << D << " V " << V << " threads " << t);
      const auto x = torch::randn({N, D}, torch::kFloat64), w = torch::randn({V, D}, torch::kFloat64) * 0.5;
      const auto targets = torch::randint(0, V, {N});
      REQUIRE(K::linear_cross_entropy_loop_applies(x, w));
      const auto f = [&](const std::vector<torch::Tensor>& v) {
        return K::linear_cross_entropy_mean(v[0], v[1], targets);
      };
      const auto g = [&](const std::vector<torch::Tensor>& v) {
        return torch::nn::functional::cross_entropy(torch::linear(v[0], v[1]), targets);
      };
      CHECK(max_rel_diff(f({x, w}), g({x, w})) < 1e-13);
      CHECK(max_rel_diff(f({x.to(torch::kFloat), w.to(torch::kFloat)}), g({x, w})) < 1e-5);
      const auto both = grads_of(f, g, {x, w});  // an upstream gradient other than 1 (grads_of draws it)
      REQUIRE(both.size() == 2);
      for (const auto& [mine, twin] : both) CHECK(max_rel_diff(mine, twin) < 1e-12);
      for (const auto& [mine, twin] : grads_of(f, g, {x.to(torch::kFloat), w.to(torch::kFloat)}))
        CHECK(max_rel_diff(mine, twin) < 2e-5);
      // A loss taken as it is (the trainer's backward of the bare loss) gets the kept gradients unscaled.
      const auto xa = x.clone().requires_grad_(true), xb = x.clone().requires_grad_(true);
      f({xa, w}).backward();
      g({xb, w}).backward();
      CHECK(max_rel_diff(xa.grad(), xb.grad()) < 1e-12);
    }
  at::set_num_threads(threads);
  CHECK_FALSE(K::linear_cross_entropy_loop_applies(torch::randn({2, 4}), torch::randn({5, 4}, torch::kFloat64)));
  CHECK_THROWS_WITH(K::linear_cross_entropy_mean(torch::randn({2, 4}), torch::randn({5, 4}), torch::tensor({1, 5})),
                    Catch::Contains("target 5 of row 1 is no class of 5"));
}

TEST_CASE("adamw_update_cpu == AdamW written in libtorch ops, five steps, float64 and float32", "[kernels]") {
  torch::manual_seed(11);
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const auto opt = torch::TensorOptions().dtype(dtype);
    auto p = torch::randn({37, 5}, opt), m = torch::zeros_like(p), v = torch::zeros_like(p);
    auto p_twin = p.to(torch::kFloat64, false, true), m_twin = torch::zeros_like(p_twin),
         v_twin = torch::zeros_like(p_twin);
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int step = 1; step <= 5; ++step) {
      const auto g = torch::randn_like(p) * (step == 3 ? 1e-6 : 1.0);  // one step of tiny gradients: eps matters
      p.mutable_grad() = g;
      const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      REQUIRE(K::adamw_loop_applies(p, m, v));
      const auto version = p._version();
      K::adamw_update_cpu(p, m, v, {lr, b1, b2, eps, 1 - lr * wd, bc1, bc2});
      CHECK(p._version() > version);           // a raw-pointer write that in-place readers can see (fused_projection.h)
      const auto g64 = g.to(torch::kFloat64);  // Loshchilov & Hutter's AdamW, decoupled decay first
      p_twin = p_twin * (1 - lr * wd);
      m_twin = b1 * m_twin + (1 - b1) * g64;
      v_twin = b2 * v_twin + (1 - b2) * g64 * g64;
      p_twin = p_twin - lr / bc1 * m_twin / ((v_twin / bc2).sqrt() + eps);
    }
    const double tol = dtype == torch::kFloat64 ? 1e-13 : 2e-6;
    CHECK(max_rel_diff(p, p_twin) < tol);
    CHECK(max_rel_diff(m, m_twin) < tol);
    CHECK(max_rel_diff(v, v_twin) < tol);
  }
  auto strided = torch::randn({4, 6}).t();
  strided.mutable_grad() = torch::randn({6, 4});
  CHECK_FALSE(K::adamw_loop_applies(strided, torch::zeros({6, 4}), torch::zeros({6, 4})));
}

TEST_CASE("clip_grad_norm_cpu == torch::nn::utils::clip_grad_norm_: the norm, and gradients scaled only above",
          "[kernels]") {
  torch::manual_seed(13);
  for (double max_norm : {0.5, 1e9})
    for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
      std::vector<torch::Tensor> mine, twin;
      for (auto shape : {std::vector<int64_t>{40, 3}, {7}, {1000}}) {
        auto p = torch::randn(shape, torch::TensorOptions().dtype(dtype)).requires_grad_(true);
        auto q = p.detach().clone().requires_grad_(true);
        const auto g = torch::randn(shape, torch::TensorOptions().dtype(dtype));
        p.mutable_grad() = g.clone(), q.mutable_grad() = g.clone();
        mine.push_back(p), twin.push_back(q);
      }
      mine.push_back(torch::zeros({3}, torch::TensorOptions().dtype(dtype)).requires_grad_(true));  // no gradient
      REQUIRE(K::grads_fit_clip_loop(mine));
      const double norm = K::clip_grad_norm_cpu(mine, max_norm);
      const double twin_norm = torch::nn::utils::clip_grad_norm_(twin, max_norm);
      CHECK(norm == Approx(twin_norm).epsilon(dtype == torch::kFloat64 ? 1e-13 : 1e-6));
      for (size_t i = 0; i < twin.size(); ++i) CHECK(max_rel_diff(mine[i].grad(), twin[i].grad()) < 1e-6);
    }
}
