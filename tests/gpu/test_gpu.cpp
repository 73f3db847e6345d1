// The GPU path on a CUDA device, in one binary (ctest `gpu`): the chunked and fused CUDA decay kernels against the
// naive recurrence on the CPU (outputs, final state, every gradient; fp32 within 1e-4 relative, bf16 and fp16
// within 2e-2 of the largest magnitude, with the reference fed the same rounded inputs), lengths that are not a
// multiple of the chunk, strong and no decay, the model's parallel form against its step form on the GPU, and a
// directory removed from this process (the worker's run on CUDA is ctest `gpu_worker`). Exits 77 (ctest: skipped) with
// the reason where no CUDA device can be used or fwlab was built without its CUDA kernels.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#if defined(FWLAB_TORCH_CUDA)  // a CUDA libtorch: its streams (kernels/CMakeLists.txt defines it)
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "kernels/decay/decay.h"
#include "models/gpt.h"
#include "tests/gpu/chunked_cases.h"
#include "tests/test_support.h"
#include "tests/test_util.h"

using namespace fwlab;
namespace K = fwlab::kernels;

namespace {

using Inputs = test::DecayInputs;

// A copy as leaves of another device / dtype (gates and the state in gate_dtype: fp32 or fp64, as the kernels use
// them).
Inputs as(const Inputs& in, torch::Device device, torch::ScalarType dtype, torch::ScalarType gate_dtype) {
  auto leaf = [&](const torch::Tensor& t, torch::ScalarType d) {
    return t.defined() ? t.detach().to(device, d).requires_grad_(true) : t;
  };
  return {leaf(in.q, dtype),          leaf(in.k, dtype),          leaf(in.v, dtype),
          leaf(in.log_a, gate_dtype), leaf(in.log_b, gate_dtype), leaf(in.state0, gate_dtype)};
}

Inputs make_inputs(int64_t T, int value_gate, bool key_gate, double strength, int64_t M, int64_t D) {
  const int64_t B = 2, H = 3;
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto gate = [&](int64_t w) { return torch::log_sigmoid(torch::randn({B, H, T, w}, opt) + 1.0) * strength; };
  Inputs in{torch::randn({B, H, T, M}, opt) / std::sqrt(double(M)),
            torch::randn({B, H, T, M}, opt) / std::sqrt(double(M)),
            torch::randn({B, H, T, D}, opt),
            {},
            {},
            torch::randn({B, H, D, M}, opt)};
  if (value_gate == 1) in.log_a = gate(1);
  if (value_gate == 2) in.log_a = gate(D);
  if (key_gate) in.log_b = gate(M);
  return in;
}

struct Outcome {
  torch::Tensor y, state;
  std::vector<torch::Tensor> grads;
};

template <typename F>
Outcome run(const Inputs& in, const torch::Tensor& gy, const torch::Tensor& gs, F recurrence) {
  auto r = recurrence(in);
  auto loss =
      (r.y.to(torch::kFloat64) * gy.to(r.y.device())).sum() + (r.state.to(torch::kFloat64) * gs.to(r.y.device())).sum();
  return {r.y, r.state, torch::autograd::grad({loss}, in.all())};
}

// |a - b| over the largest |b| (at least 1e-6), on the CPU in float64.
double gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().cpu().to(torch::kFloat64), y = b.detach().cpu().to(torch::kFloat64);
  return (x - y).abs().max().item<double>() / std::max(1e-6, y.abs().max().item<double>());
}

enum class Kernel { chunked, fused };

void check_kernel(Kernel kernel, const Inputs& in64, torch::ScalarType dtype, double tolerance) {
  // The reference sees the inputs rounded as the kernel does, so only the kernel's own arithmetic is measured.
  const auto gate_dtype = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto rounded = as(as(in64, torch::kCPU, dtype, gate_dtype), torch::kCPU, torch::kFloat64, torch::kFloat64);
  const auto gpu = as(in64, torch::kCUDA, dtype, gate_dtype);
  auto probe = K::decay_recurrence_naive(rounded.q, rounded.k, rounded.v, rounded.log_a, rounded.log_b, rounded.state0);
  const auto gy = torch::randn_like(probe.y), gs = torch::randn_like(probe.state);
  const auto slow = run(rounded, gy, gs, [](const Inputs& i) {
    return K::decay_recurrence_naive(i.q, i.k, i.v, i.log_a, i.log_b, i.state0);
  });
  const auto fast = run(gpu, gy, gs, [&](const Inputs& i) {
    return kernel == Kernel::chunked ? K::decay_recurrence_cuda_chunked(i.q, i.k, i.v, i.log_a, i.log_b, i.state0)
                                     : K::decay_recurrence_cuda_fused(i.q, i.k, i.v, i.log_a, i.log_b, i.state0);
  });
  CHECK(gap(fast.y, slow.y) <= tolerance);
  CHECK(gap(fast.state, slow.state) <= tolerance);
  const char* names[] = {"q", "k", "v", "log_a", "log_b", "state0"};
  size_t g = 0;
  int slot = 0;
  for (const auto& t : {in64.q, in64.k, in64.v, in64.log_a, in64.log_b, in64.state0}) {
    if (t.defined()) {
      INFO("gradient of " << names[slot] << ": gap " << gap(fast.grads[g], slow.grads[g]));
      CHECK(gap(fast.grads[g], slow.grads[g]) <= tolerance);
      ++g;
    }
    ++slot;
  }
}

}  // namespace

TEST_CASE("GPU: the chunked CUDA kernel == naive recurrence on the CPU, every gate layout, fp64 / fp32 / bf16 / fp16",
          "[gpu]") {
  torch::manual_seed(31);
  struct Precision {
    torch::ScalarType dtype;
    double tolerance;
  };
  for (auto p : {Precision{torch::kFloat64, 1e-10}, Precision{torch::kFloat32, 1e-4}, Precision{torch::kBFloat16, 2e-2},
                 Precision{torch::kFloat16, 2e-2}})
    for (int value_gate : {0, 1, 2})
      for (bool key_gate : {false, true})
        for (int64_t T : {1, 63, 64, 65, 300}) {
          DYNAMIC_SECTION(c10::toString(p.dtype)
                          << ", value gate " << value_gate << ", key gate " << key_gate << ", T=" << T) {
            const auto shape =
                test::chunked_sweep_shape(p.dtype);  // fits an A100's shared memory (tests/gpu/chunked_cases.h)
            check_kernel(Kernel::chunked, make_inputs(T, value_gate, key_gate, 1.0, shape.M, shape.D), p.dtype,
                         p.tolerance);
          }
        }
}

TEST_CASE("GPU: the chunked CUDA kernel at the extremes: strong and no decay, m = 64, D not a multiple of 16",
          "[gpu]") {
  torch::manual_seed(32);
  SECTION("strong decay: log-gates around -40") {
    check_kernel(Kernel::chunked, make_inputs(200, 2, true, 40.0, 32, 64 /* the fp32 sweep shape */), torch::kFloat32,
                 1e-4);
  }
  SECTION("no decay: log-gates 0") {
    check_kernel(Kernel::chunked, make_inputs(200, 2, true, 0.0, 32, 64), torch::kFloat32, 1e-4);
  }
  SECTION("m = 64, bf16") {
    check_kernel(Kernel::chunked, make_inputs(257, 2, true, 1.0, test::kChunkedWideKeys.M, test::kChunkedWideKeys.D),
                 torch::kBFloat16, 2e-2);
  }
  SECTION("D = 65 (attention normalisation's extra row), fp32") {
    check_kernel(Kernel::chunked, make_inputs(130, 2, true, 1.0, test::kChunkedOddRows.M, test::kChunkedOddRows.D),
                 torch::kFloat32, 1e-4);
  }
}

TEST_CASE("GPU: the fused recurrent CUDA kernel == naive recurrence on the CPU, fp64 / fp32", "[gpu]") {
  torch::manual_seed(33);
  for (auto dtype : {torch::kFloat64, torch::kFloat32})
    for (int value_gate : {0, 1, 2})
      for (int64_t T : {1, 17, 53}) {
        DYNAMIC_SECTION(c10::toString(dtype) << ", value gate " << value_gate << ", T=" << T) {
          check_kernel(Kernel::fused, make_inputs(T, value_gate, true, 1.0, 32, 64), dtype,
                       dtype == torch::kFloat64 ? 1e-10 : 1e-4);
        }
      }
}

#if defined(FWLAB_TORCH_CUDA)
TEST_CASE("GPU: the CUDA kernels launch on libtorch's current stream", "[gpu]") {
  // On a non-blocking side stream, q is written only after a long sleep; a kernel launched on any other stream
  // would read the zeros q holds before that and give y = 0.
  torch::manual_seed(35);
  const auto in64 = make_inputs(130, 2, true, 1.0, 32, 32);
  const auto reference = K::decay_recurrence_naive(in64.q, in64.k, in64.v, in64.log_a, in64.log_b, in64.state0);
  for (auto kernel : {Kernel::chunked, Kernel::fused}) {
    const auto gpu = as(in64, torch::kCUDA, torch::kFloat32, torch::kFloat32);
    auto q_late = torch::zeros_like(gpu.q);
    torch::cuda::synchronize();
    const auto side = c10::cuda::getStreamFromPool();
    torch::Tensor y;
    {
      const c10::cuda::CUDAStreamGuard on_side(side);
      at::cuda::sleep(200 * 1000 * 1000);  // ~0.1 s of GPU cycles ahead of the copy
      q_late.copy_(gpu.q.detach());
      y = (kernel == Kernel::chunked ? K::decay_recurrence_cuda_chunked : K::decay_recurrence_cuda_fused)(
              q_late, gpu.k.detach(), gpu.v.detach(), gpu.log_a.detach(), gpu.log_b.detach(), gpu.state0.detach())
              .y;
    }
    side.synchronize();
    CHECK(gap(y, reference.y) <= 1e-4);
  }
}
#endif

TEST_CASE("GPU: a hybrid model's parallel logits == its step-by-step logits on CUDA (fp32)", "[gpu]") {
  torch::manual_seed(34);
  auto cfg = test::small_config(MixerSpec{}, 4, 16);
  cfg.layers = {test::fw("decay", "identity", "none", 16), test::fw("gated", "elu1", "attn", 16), MixerSpec{},
                test::fw("delta", "relu", "attn", 8)};
  cfg.layers[2].kind = "softmax";
  cfg.context = 96;  // 90 steps, past a chunk boundary of the decay kernel
  GPT model(cfg);
  model->to(torch::kCUDA);
  model->eval();
  torch::NoGradGuard guard;
  auto idx = torch::randint(0, 50, {2, 90}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  auto logits = model->forward(idx);
  GenerationState state;
  for (int64_t t = 0; t < 90; ++t) {
    INFO("position " << t);
    CHECK(gap(model->step(idx.select(1, t), state), logits.select(1, t)) < 1e-4);
  }
}

TEST_CASE("GPU: a directory tree is removed from a process linked with CUDA libtorch", "[gpu]") {
  // std::filesystem::remove_all(path, error_code&) called through a null pointer here on an H100 (PyTorch 2.11's
  // libtorch.so exports its own copy; results/gpu/README.md): TempDir now removes with contract's remove_tree.
  std::filesystem::path kept;
  {
    test::TempDir dir("gpu-remove");
    kept = dir.path();
    std::filesystem::create_directories(kept / "a" / "b");
    test::spit((kept / "a" / "b" / "events.jsonl").string(), "{}\n");
    test::spit((kept / "job.json").string(), "{}");
  }
  CHECK_FALSE(std::filesystem::exists(kept));
}

int main(int argc, char** argv) {
  if (!K::cuda_kernels_built()) {
    std::puts(
        "skipped: fwlab was built without its CUDA kernels (no nvcc found when configuring; see cmake/cuda.cmake)");
    return 77;
  }
  if (!torch::cuda::is_available()) {
    std::puts(torch::cuda::device_count() == 0
                  ? "skipped: no CUDA device visible to libtorch (a CPU-only libtorch, or no GPU)"
                  : "skipped: libtorch cannot use the CUDA device");
    return 77;
  }
  torch::ones({1}, torch::kCUDA).sum().item<float>();  // libtorch's CUDA libraries loaded and initialised first
  return Catch::Session().run(argc, argv);
}
