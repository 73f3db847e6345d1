#include "worker/doctor.h"

#include <fmt/format.h>
#include <torch/version.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "contract/version.h"
#include "kernels/cuda_info.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/delta/cuda_guard.h"
#include "kernels/delta/delta.h"

namespace fwlab {

namespace {

namespace K = kernels;

struct Check {
  std::string kernel;
  K::DecayKernel run;
  torch::ScalarType dtype;
  bool cuda_chunks = false;  // the chunked CUDA kernel, whose shared memory may not fit the GPU
};

const char* dtype_name(torch::ScalarType t) {
  return t == torch::kFloat32 ? "fp32" : t == torch::kBFloat16 ? "bf16" : t == torch::kFloat16 ? "fp16" : "fp64";
}

void print_header(const K::CudaReport& cuda, bool gpu) {
  fmt::print("fwlab doctor: fwlab {} (commit {})\n", kFwlabVersion, kFwlabGitCommit);
  fmt::print("  libtorch      {} ({})\n", TORCH_VERSION,
             torch::cuda::is_available() ? "with CUDA" : "no CUDA device usable through it");
  if (!cuda.kernels_built) {
    fmt::print("  CUDA kernels  not built (no nvcc when fwlab was configured: see README, GPU section)\n");
  } else {
    fmt::print("  CUDA kernels  built for sm {} by nvcc {}\n", cuda.architectures.empty() ? "?" : cuda.architectures,
               cuda.nvcc);
    fmt::print("  CUDA          runtime {}, driver {}{}\n", K::cuda_version_text(cuda.runtime),
               K::cuda_version_text(cuda.driver), cuda.error.empty() ? "" : fmt::format(" ({})", cuda.error));
  }
  if (gpu) {
    fmt::print("  device        cuda:0 {} (sm_{}, {} KiB shared memory per block), running the kernels' sm_{} code{}\n",
               cuda.device_name, cuda.capability, cuda.shared_optin / 1024, cuda.running_arch / 10,
               cuda.running_arch / 10 < 80 ? ": no tensor cores for bf16 / fp16 (rebuild for sm_80 or newer)" : "");
  } else {
    fmt::print(
        "  device        no CUDA device usable ({}): checking the host paths instead — the chunked kernel's block "
        "programs run on the CPU (fp16 / bf16 stages emulated) and the fused CPU kernel\n",
        !cuda.kernels_built            ? "fwlab built without CUDA"
        : !torch::cuda::is_available() ? "libtorch sees none"
                                       : "?");
  }
}

K::DecayKernel host_chunks() {
  return [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& a,
            const torch::Tensor& b,
            const torch::Tensor& s) { return K::decay_recurrence_chunks_host(q, k, v, a, b, s, 1); };
}

// The kernels to check on this machine: the CUDA ones on a GPU, else the host paths.
std::vector<Check> checks_for(bool gpu) {
  std::vector<Check> out;
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16})
    out.push_back({gpu ? "chunked (CUDA)" : "chunked (host run)",
                   gpu ? K::custom_kernel(K::CustomKernel::cuda_chunked) : host_chunks(), dtype, gpu});
  if (gpu) {
    const K::DecayKernel fused = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& s) {
      return K::decay_recurrence_cuda_fused(q, k, v, a, b, s);
    };
    out.push_back({"fused (CUDA)", fused, torch::kFloat32});
  } else {
    out.push_back({"fused (CPU)", K::custom_kernel(K::CustomKernel::cpu_fused), torch::kFloat32});
  }
  return out;
}

// Why a chunked CUDA case cannot run on this GPU (its shared memory), or "".
std::string unfit_reason(const Check& check, const K::DecayCase& c) {
  if (!check.cuda_chunks) return "";
  const auto q = torch::empty({1, 1, 1, c.M}, torch::TensorOptions().dtype(c.dtype).device(c.device));
  const auto v = torch::empty({1, 1, 1, c.D}, q.options());
  return K::cuda_chunks_fit(q, v) ? "" : "does not fit this GPU's shared memory: models use the libtorch form here";
}

// The delta family's chunked kernel (CUDA on a GPU, its block programs on the host otherwise) against the libtorch
// WY form, gated (the gated delta rule) and not (the delta rule); the test hook applies to both runners. The host
// runs bf16 and fp16 through the tensor-core programs the GPU runs for them (one emulated warp per block: slow
// enough).
void check_delta_family(bool gpu, bool quick, int& passed, int& failed) {
  const K::DeltaKernel kernel = [gpu](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& s) {
    if (gpu) return K::delta_cuda_kernel(q, k, v, a, b, s);
    const bool tensor_cores = q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kFloat16;
    auto r = K::gated_delta_recurrence_chunks_host(q, k, v, a, b, s, tensor_cores ? 32 : 1, tensor_cores);
    if (K::kernel_made_wrong(K::kDeltaChunksKernel)) r.y = r.y * 1.1;
    return r;
  };
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16})
    for (int64_t width : gpu ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{64})
      for (bool gated : {true, false}) {
        K::DeltaCase c;
        c.B = gpu ? 2 : 1, c.H = gpu ? 4 : 1, c.T = gpu ? 1000 : quick ? 72 : 200, c.D = c.M = width;
        c.dtype = dtype, c.gated = gated, c.device = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
        const auto row =
            fmt::format("{:<20} {:<5} {:>4} {:>4} {:>5} {:<7}", gpu ? "delta chunked (CUDA)" : "delta (host run)",
                        dtype_name(dtype), c.D, c.M, c.T, gated ? "alpha" : "none");
        const auto probe = torch::empty({1, 1, 1, width}, torch::TensorOptions().dtype(dtype).device(c.device));
        if (gpu && !K::delta_cuda_chunks_fit(probe, probe)) {
          fmt::print("{} skipped: does not fit this GPU's shared memory: models use the libtorch form here\n", row);
          continue;
        }
        const auto r = K::compare_delta_with_libtorch(kernel, c);
        fmt::print("{} {:>9.2e} {:<8} {:>9.0e} {:>10.2f} {:>12.2f}  {}\n", row, r.max_error, "(" + r.worst + ")",
                   r.tolerance, r.kernel_ms, r.reference_ms, r.passed() ? "pass" : "FAIL");
        std::fflush(stdout);
        (r.passed() ? passed : failed) += 1;
      }
}

}  // namespace

int run_doctor(const DoctorOptions& options) {
  torch::set_num_threads(options.threads > 0 ? options.threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  K::set_wrong_kernel(options.wrong_kernel);
  const auto cuda = K::cuda_report();
  const bool gpu = cuda.kernels_built && torch::cuda::is_available() && cuda.devices > 0;
  print_header(cuda, gpu);
  fmt::print(
      "\nEach kernel against libtorch's chunked form on the same device: forward and every gradient; error = the "
      "largest\n"
      "|kernel - libtorch| over the largest |libtorch|, over y, the final state and every gradient.\n\n");
  fmt::print("{:<20} {:<5} {:>4} {:>4} {:>5} {:<7} {:>9} {:<8} {:>9} {:>10} {:>12}  {}\n", "kernel", "dtype", "D", "M",
             "T", "decay", "error", "(where)", "tolerance", "kernel ms", "libtorch ms", "result");
  int passed = 0, failed = 0;
  for (const auto& check : checks_for(gpu))
    for (int64_t width : {int64_t{64}, int64_t{128}})
      for (bool strong : {true, false}) {
        K::DecayCase c;
        c.B = gpu ? 2 : 1, c.H = gpu ? 4 : 2,
        c.T = gpu             ? 1000
              : options.quick ? 72
                              : 200;  // off the 64-step chunk, 16-step segment
        c.D = c.M = width, c.dtype = check.dtype,
        c.device = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
        c.value_gate = strong ? 2 : 0, c.key_gate = strong, c.strength = 5.0,
        c.seed = 7;  // strong: gates ~ 0.2; none: the additive rule
        const auto row = fmt::format("{:<20} {:<5} {:>4} {:>4} {:>5} {:<7}", check.kernel, dtype_name(c.dtype), c.D,
                                     c.M, c.T, strong ? "strong" : "none");
        if (const auto why = unfit_reason(check, c); !why.empty()) {
          fmt::print("{} skipped: {}\n", row, why);
          continue;
        }
        const auto r = K::compare_with_libtorch(check.run, c, gpu ? 5 : 1);
        fmt::print("{} {:>9.2e} {:<8} {:>9.0e} {:>10.2f} {:>12.2f}  {}\n", row, r.max_error, "(" + r.worst + ")",
                   r.tolerance, r.kernel_ms, r.reference_ms, r.passed() ? "pass" : "FAIL");
        std::fflush(stdout);
        (r.passed() ? passed : failed) += 1;
      }
  check_delta_family(gpu, options.quick, passed, failed);
  K::set_wrong_kernel("");
  fmt::print("\n{} passed, {} failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace fwlab
