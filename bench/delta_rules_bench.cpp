// The delta-rule family's CPU kernels side by side in one run, forward + backward (y.backward(g)), float32, B4 H4:
// each rule's fused recurrent kernel and, for delta and gated delta, the chunkwise-parallel WY form: the CPU kernel
// around small matrix products (kernels/delta/chunk_cpu.cpp) at 16, 32 and 64 steps a chunk, and the same algebra
// as libtorch ops (chunk_libtorch.cpp, what other devices run); for decay its fused kernel and the chunked one around
// BLAS (kernels/decay/chunk_cpu.cpp: sub-chunks of 16 steps), at D = M in {32, 64, 128} and T in {256, 1024, 4096},
// each beside a 2048^2 sgemm on the same threads run by turns with it: the machine's limit at that minute. Not a test:
// figures and ratios to read.
//
//   fwlab-bench-delta [--threads N] [--repeats R] [--quick] [--only TEXT]
//     --quick: D = M = 64, T = 1024 only; --only: the forms whose "rule form" holds TEXT ("gated delta chunk 32")
//
// FLOPs per token and head, forward: delta 6 D M (read u = S k: 2, write delta k^T: 2, read S q: 2); gated delta
// 8 D M (plus the decay of S: 2); decay 6 D M. Forward + backward is counted as 3x the forward (the usual
// convention), whatever the form does: the chunked forms' extra products within chunks and the fused kernels'
// recomputation of states are overhead, not counted. "held": the heap the forward leaves for the backward (the
// autograd graph's saved tensors, y excluded), against the all-states form's B H T D M floats.
#include <malloc.h>
#include <torch/torch.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/timing.h"
#include "kernels/blas_core.h"
#include "kernels/memory_policy.h"
#include "kernels/decay/decay.h"
#include "kernels/delta/delta.h"

namespace K = fwlab::kernels;

namespace {

using Run = std::function<K::RecurrenceResult(const std::vector<torch::Tensor>&)>;  // q, k, v, alpha, beta, a, b

struct Form {
  const char* rule;
  const char* form;
  double forward_flops_per_dm;  // per token and head, in units of D * M
  Run run;
};

std::vector<Form> forms() {
  using V = std::vector<torch::Tensor>;
  return {
      {"delta", "fused", 6, [](const V& i) { return K::delta_recurrence_fused(i[0], i[1], i[2], i[4], {}); }},
      {"delta", "libtorch 64", 6,
       [](const V& i) { return K::delta_recurrence_chunked(i[0], i[1], i[2], i[4], {}, 64); }},
      {"delta", "chunk 16", 6,
       [](const V& i) { return K::gated_delta_recurrence_chunk_cpu(i[0], i[1], i[2], {}, i[4], {}, 16); }},
      {"delta", "chunk 32", 6,
       [](const V& i) { return K::gated_delta_recurrence_chunk_cpu(i[0], i[1], i[2], {}, i[4], {}, 32); }},
      {"delta", "chunk 64", 6,
       [](const V& i) { return K::gated_delta_recurrence_chunk_cpu(i[0], i[1], i[2], {}, i[4], {}, 64); }},
      {"gated delta", "fused", 8,
       [](const V& i) { return K::gated_delta_recurrence_fused(i[0], i[1], i[2], i[3], i[4], {}); }},
      {"gated delta", "libtorch 64", 8,
       [](const V& i) { return K::gated_delta_recurrence_chunked(i[0], i[1], i[2], i[3], i[4], {}, 64); }},
      {"gated delta", "chunk 16", 8,
       [](const V& i) { return K::gated_delta_recurrence_chunk_cpu(i[0], i[1], i[2], i[3], i[4], {}, 16); }},
      {"gated delta", "chunk 32", 8,
       [](const V& i) { return K::gated_delta_recurrence_chunk_cpu(i[0], i[1], i[2], i[3], i[4], {}, 32); }},
      {"gated delta", "chunk 64", 8,
       [](const V& i) { return K::gated_delta_recurrence_chunk_cpu(i[0], i[1], i[2], i[3], i[4], {}, 64); }},
      {"decay", "fused", 6, [](const V& i) { return K::decay_recurrence_fused(i[0], i[1], i[2], i[5], i[6], {}); }},
      {"decay", "chunk cpu", 6,
       [](const V& i) { return K::decay_recurrence_chunk_cpu(i[0], i[1], i[2], i[5], i[6], {}); }},
  };
}

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

double heap_bytes() {
  const auto m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);
}

struct Measured {
  double ms = 0, held_bytes = 0, sgemm_gflops = 0;
};

// The machine's limit: a 2048^2 sgemm on the same threads.
struct Sgemm {
  torch::Tensor a = torch::randn({2048, 2048}), b = torch::randn({2048, 2048});
  void run() const { (void)torch::mm(a, b); }
  static double gflops(double seconds) { return 2.0 * 2048.0 * 2048.0 * 2048.0 / seconds / 1e9; }
};

// The form and the sgemm by turns (after a warm-up of each), each row's ratio from the medians of the same minute:
// this VM's sgemm moves by 30-40 % within an hour, so a limit measured once at the start made the ratios drift.
Measured measure(const Form& form, const std::vector<torch::Tensor>& in, int repeats, const Sgemm& sgemm) {
  const auto gy = torch::randn_like(in[2]);
  const auto pass = [&] {
    for (const auto& t : in) t.mutable_grad() = torch::Tensor();
    form.run(in).y.backward(gy);
  };
  pass(), sgemm.run();
  std::vector<double> form_s, sgemm_s;
  for (int i = 0; i < repeats; ++i) {
    form_s.push_back(fwlab::bench::seconds(pass));
    sgemm_s.push_back(fwlab::bench::seconds([&] { sgemm.run(); }));
  }
  Measured m;
  m.ms = 1e3 * fwlab::bench::median(form_s), m.sgemm_gflops = Sgemm::gflops(fwlab::bench::median(sgemm_s));
  for (const auto& t : in) t.mutable_grad() = torch::Tensor();
  const double before = heap_bytes();
  auto r = form.run(in);
  m.held_bytes = heap_bytes() - before - static_cast<double>((r.y.numel() + r.state.numel()) * 4);
  return m;
}

void print_size(int64_t B, int64_t H, int64_t T, int64_t D, int repeats, const Sgemm& sgemm, const std::string& only) {
  const auto in = inputs(B, H, T, D);
  const double all_states = static_cast<double>(B * H * T * D * D) * 4;
  for (const auto& form : forms()) {
    if ((std::string(form.rule) + " " + form.form).find(only) == std::string::npos) continue;
    const auto m = measure(form, in, repeats, sgemm);
    const double gflops = 3.0 * form.forward_flops_per_dm * static_cast<double>(B * H * T * D * D) / (m.ms * 1e6);
    fmt::print("{:<20} {:<12} {:<12} {:>9.1f} {:>8.1f} {:>7.0f} {:>9.0f}% {:>10.1f} {:>9.2f}\n",
               fmt::format("B{} H{} T{} D=M={}", B, H, T, D), form.rule, form.form, m.ms, gflops, m.sgemm_gflops,
               100 * gflops / m.sgemm_gflops, m.held_bytes / (1 << 20), m.held_bytes / all_states);
  }
}

}  // namespace

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  fwlab::keep_freed_memory_mapped();   // as the worker runs (kernels/memory_policy.h)
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), repeats = 5;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
  }
  torch::set_num_threads(threads);
  const Sgemm sgemm;
  fmt::print("delta-rule family on the CPU, float32, forward + backward, median of {} runs, {} threads\n", repeats,
             threads);
  fmt::print(
      "sgemm: 2048 x 2048 x 2048 on the same threads (the machine's limit), run by turns with each row's form\n\n");
  fmt::print("{:<20} {:<12} {:<12} {:>9} {:>8} {:>7} {:>10} {:>10} {:>9}\n", "size", "rule", "form", "ms", "GFLOP/s",
             "sgemm", "of sgemm", "held MiB", "x states");
  for (int64_t D : {32, 64, 128})
    for (int64_t T : {256, 1024, 4096})
      if (!quick || (D == 64 && T == 1024)) print_size(4, 4, T, D, repeats, sgemm, only);
  return 0;
}
