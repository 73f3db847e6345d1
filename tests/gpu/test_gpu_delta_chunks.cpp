// The delta family's chunked CUDA kernel (kernels/delta/cuda/chunks.h) on a GPU: against the libtorch WY form on the
// same device in fp64 and fp32 (outputs, final state, every gradient), bf16 and fp16 inputs (the tensor-core
// programs) against the fp32 form, the first-use check turning a wrong kernel into a reported fallback, and every
// rule's model training on CUDA as on the CPU. The kernel must be the one that ran: a fallback would pass silently,
// so none may be reported. Part of fwlab_gpu_tests (its main skips without a device).
#include <catch2/catch.hpp>

#include "kernels/delta/cuda_guard.h"
#include "kernels/delta/delta.h"
#include "kernels/delta/form_race.h"
#include "models/gpt.h"
#include "tests/gpu/heard_fallbacks.h"
#include "tests/test_util.h"

using namespace fwlab;
namespace K = fwlab::kernels;
using fwlab::test::HeardFallbacks;

namespace {

// q, k, v, alpha (undefined: delta), beta, state0 on `device`: unit keys and queries, leaves needing gradients.
std::vector<torch::Tensor> inputs(int64_t T, int64_t D, int64_t M, bool gated, torch::Device device,
                                  torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  namespace F = torch::nn::functional;
  auto unit = [&] { return F::normalize(torch::randn({2, 3, T, M}, f64), F::NormalizeFuncOptions().dim(-1)); };
  std::vector<torch::Tensor> in{unit(),
                                unit(),
                                torch::randn({2, 3, T, D}, f64),
                                gated ? torch::sigmoid(torch::randn({2, 3, T, 1}, f64) + 2) : torch::Tensor(),
                                torch::sigmoid(torch::randn({2, 3, T, 1}, f64)),
                                torch::randn({2, 3, D, M}, f64)};
  const auto wide = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  for (size_t n = 0; n < in.size(); ++n)
    if (in[n].defined()) in[n] = in[n].to(device, n < 3 ? dtype : wide).requires_grad_(true);
  return in;
}

// The kernel against the libtorch WY form on the GPU through the first-use check's own comparison (y, final
// state, every gradient; fp64 1e-9, fp32 1e-4, bf16 2e-2 of the largest magnitude), at the shape given.
void check_kernel(int64_t T, int64_t D, int64_t M, bool gated, torch::ScalarType dtype) {
  K::DeltaCase c;
  c.B = 2, c.H = 3, c.T = T, c.D = D, c.M = M, c.dtype = dtype, c.device = torch::kCUDA, c.gated = gated;
  const auto r = K::compare_delta_with_libtorch(K::delta_cuda_kernel, c);
  INFO("T " << T << " D " << D << " M " << M << (gated ? " gated " : " delta ") << c10::toString(dtype) << ": "
            << r.worst << " off by " << r.max_error << " (tolerance " << r.tolerance << ")");
  CHECK(r.passed());
}

}  // namespace

TEST_CASE("GPU: the delta chunks kernel == the libtorch WY form on the GPU (y, state, every gradient)", "[gpu]") {
  HeardFallbacks listener;
  for (const bool gated : {true, false}) {
    check_kernel(200, 48, 32, gated, torch::kFloat64);
    check_kernel(200, 64, 64, gated, torch::kFloat32);
    check_kernel(1000, 128, 128, gated, torch::kFloat32);
    // bf16 and fp16 run the tensor-core programs (kernels/delta/cuda/chunks_mma.h): partial tiles too.
    check_kernel(300, 64, 64, gated, torch::kBFloat16);
    check_kernel(200, 48, 20, gated, torch::kBFloat16);
    check_kernel(300, 128, 128, gated, torch::kHalf);
  }
  CHECK(listener.heard.empty());
}

TEST_CASE("GPU: the delta family runs its CUDA kernel on CUDA tensors, and a wrong one falls back, reported", "[gpu]") {
  {
    HeardFallbacks listener;
    const auto in = inputs(100, 64, 64, true, torch::kCUDA, torch::kFloat32, 52);
    CHECK(K::delta_cuda_kernel_trusted(in[0], in[2], in[3]));
    CHECK(listener.heard.empty());
  }
  HeardFallbacks listener;
  K::set_wrong_kernel(K::kDeltaChunksKernel);
  const auto in = inputs(100, 64, 64, true, torch::kCUDA, torch::kFloat32, 53);
  const auto r = K::delta_family_recurrence(in[0], in[1], in[2], in[3], in[4], in[5]);
  const auto plain = K::gated_delta_recurrence_chunked(in[0], in[1], in[2], in[3], in[4], in[5], 64);
  CHECK(K::relative_gap(r.y.detach().cpu().to(torch::kFloat64), plain.y.detach().cpu().to(torch::kFloat64)) <= 1e-5);
  REQUIRE(listener.heard.size() == 1);
  CHECK(listener.heard[0].rfind(K::kDeltaChunksKernel, 0) == 0);
}

TEST_CASE("GPU: every rule's model trains on CUDA as on the CPU: loss and gradients (fp64)", "[gpu]") {
  torch::manual_seed(54);
  HeardFallbacks listener;  // none: the kernels themselves must be what ran
  auto cfg = test::every_rule_config();
  cfg.context = 128;  // 100 steps: a chunk and a padded one
  GPT model(cfg);
  model->to(torch::kFloat64);
  const auto idx = torch::randint(0, 50, {2, 100}, torch::kLong);
  auto grads_of = [&](torch::Device device) {
    model->to(device);
    model->zero_grad();
    const auto logits = model->forward(idx.to(device));
    const auto loss = logits.to(torch::kFloat64).log_softmax(-1).select(-1, 3).mean();
    loss.backward();
    std::vector<torch::Tensor> out{loss.detach().cpu()};
    for (const auto& p : model->parameters())
      if (p.grad().defined()) out.push_back(p.grad().cpu());
    return out;
  };
  const auto cpu = grads_of(torch::kCPU), gpu = grads_of(torch::kCUDA);
  REQUIRE(cpu.size() == gpu.size());
  for (size_t n = 0; n < cpu.size(); ++n) {
    INFO("tensor " << n << " (0: the loss)");
    CHECK(K::relative_gap(gpu[n], cpu[n]) <= 1e-9);
  }
  CHECK(listener.heard.empty());
}
