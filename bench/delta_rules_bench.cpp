// The delta-rule family's fused CPU kernels side by side in one run: the gated delta rule (gated_delta_recurrence_
// fused), the delta rule (delta_recurrence_fused) and the decay rule (decay_recurrence_fused, two-sided gates),
// forward + backward (y.backward(g)), float32, at B4 H4 T1024 D = M = 32 and 64. Not a test: figures and ratios to
// read; the gated delta kernel's target is within 1.5x of the delta kernel's time.
//
//   fwlab-bench-delta [--threads N] [--repeats R]
//
// FLOPs per token and head, forward: delta 6 D M (read u = S k: 2, write delta k^T: 2, read S q: 2); gated delta
// 8 D M (plus the decay of S: 2); decay 6 D M. Forward + backward is counted as 3x the forward (the usual
// convention; the gated and decay kernels' recomputation of states in the backward is overhead, not counted).
#include <torch/torch.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "kernels/blas_core.h"
#include "bench/timing.h"
#include "kernels/recurrences.h"

namespace K = fwlab::kernels;

namespace {

struct Rule {
  const char* name;
  double forward_flops_per_dm;                                                // per token and head, in units of D * M
  std::function<K::RecurrenceResult(const std::vector<torch::Tensor>&)> run;  // q, k, v, alpha, beta, log_a, log_b
};

std::vector<torch::Tensor> inputs(int64_t B, int64_t H, int64_t T, int64_t D) {
  torch::manual_seed(0);
  auto opt = torch::TensorOptions().dtype(torch::kFloat32);
  namespace F = torch::nn::functional;
  auto unit = [&](int64_t w) {
    return F::normalize(torch::randn({B, H, T, w}, opt), F::NormalizeFuncOptions().dim(-1));
  };
  std::vector<torch::Tensor> in{unit(D),
                                unit(D),
                                torch::randn({B, H, T, D}, opt),
                                torch::sigmoid(torch::randn({B, H, T, 1}, opt) + 2),
                                torch::sigmoid(torch::randn({B, H, T, 1}, opt)),
                                torch::log_sigmoid(torch::randn({B, H, T, D}, opt) + 2),
                                torch::log_sigmoid(torch::randn({B, H, T, D}, opt) + 2)};
  for (auto& t : in) t.requires_grad_(true);
  return in;
}

double fwd_bwd_seconds(const Rule& rule, const std::vector<torch::Tensor>& in, int repeats) {
  const auto gy = torch::randn_like(in[2]);
  return fwlab::bench::median_seconds(repeats, [&] {
    for (const auto& t : in) t.mutable_grad() = torch::Tensor();
    rule.run(in).y.backward(gy);
  });
}

}  // namespace

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(threads);
  const std::vector<Rule> rules = {
      {"gated delta", 8,
       [](const std::vector<torch::Tensor>& i) {
         return K::gated_delta_recurrence_fused(i[0], i[1], i[2], i[3], i[4], {});
       }},
      {"delta", 6,
       [](const std::vector<torch::Tensor>& i) { return K::delta_recurrence_fused(i[0], i[1], i[2], i[4], {}); }},
      {"decay", 6,
       [](const std::vector<torch::Tensor>& i) { return K::decay_recurrence_fused(i[0], i[1], i[2], i[5], i[6], {}); }},
  };
  fmt::print("fused CPU kernels, float32, forward + backward, median of {} runs, {} threads\n\n", repeats, threads);
  fmt::print("{:<22} {:<12} {:>10} {:>9} {:>16}\n", "size", "rule", "ms", "GFLOP/s", "x delta's time");
  for (int64_t D : {32, 64}) {
    const int64_t B = 4, H = 4, T = 1024;
    const auto in = inputs(B, H, T, D);
    std::vector<double> ms;
    for (const auto& rule : rules) ms.push_back(1e3 * fwd_bwd_seconds(rule, in, repeats));
    for (size_t r = 0; r < rules.size(); ++r) {
      const double flops = 3.0 * rules[r].forward_flops_per_dm * static_cast<double>(B * H * T * D * D);
      fmt::print("{:<22} {:<12} {:>10.1f} {:>9.2f} {:>16.2f}\n", fmt::format("B{} H{} T{} D=M={}", B, H, T, D),
                 rules[r].name, ms[r], flops / (ms[r] * 1e6), ms[r] / ms[1]);
    }
  }
  return 0;
}
