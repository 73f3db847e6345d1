// Mixed precision pieces of the worker (worker/precision.h): autocast's scope on the CPU (bf16) and fp16's
// dynamic loss scale.
#include <catch2/catch.hpp>

#include "worker/precision.h"

using namespace fwlab;

TEST_CASE("precision: autocast runs matrix products in bf16 inside the scope only", "[precision]") {
  auto x = torch::randn({4, 8}), w = torch::randn({6, 8});
  {
    const AutocastScope amp("bf16", torch::kCPU);
    auto y = torch::linear(x, w);
    CHECK(y.scalar_type() == torch::kBFloat16);
    CHECK(torch::allclose(y.to(torch::kFloat32), torch::linear(x, w).to(torch::kFloat32)));
    CHECK((y + x.narrow(1, 0, 6)).scalar_type() == torch::kFloat32);  // an fp32 residual stream stays fp32
  }
  CHECK(torch::linear(x, w).scalar_type() == torch::kFloat32);  // restored on leaving
  {
    const AutocastScope none("fp32", torch::kCPU);
    CHECK(torch::linear(x, w).scalar_type() == torch::kFloat32);
  }
  CHECK(precision_dtype("fp16") == torch::kFloat16);
  CHECK_THROWS_WITH(precision_dtype("fp8"), Catch::Contains("'fp8' is not fp32, bf16 or fp16"));
}

TEST_CASE("precision: the fp16 loss scale halves on an overflow (step skipped) and doubles after 2000 clean steps",
          "[precision]") {
  LossScaler off(false);
  CHECK(off.scale() == 1.0);
  CHECK(off.update(false));  // fp32 / bf16: nothing is skipped here (divergence checks decide)

  LossScaler s(true);
  CHECK(s.scale() == 65536.0);
  CHECK_FALSE(s.update(false));
  CHECK(s.scale() == 32768.0);
  for (int i = 0; i < 1999; ++i) REQUIRE(s.update(true));
  CHECK(s.scale() == 32768.0);
  CHECK(s.update(true));
  CHECK(s.scale() == 65536.0);
  CHECK(s.clean_steps() == 0);

  auto p = torch::ones({3}).requires_grad_(true);
  (p * 2.0 * s.scale()).sum().backward();
  s.unscale({p});
  CHECK(torch::allclose(p.grad(), torch::full({3}, 2.0)));
}
