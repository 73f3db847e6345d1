// The decay recurrence S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T, y_t = S_t q_t (two-sided log-gates), op
// level, its forms side by side in one run: the fused CPU kernel, the chunked libtorch form, the naive
// per-step loop (libtorch ops, autograd), and a per-step TorchScript loop in Python (/usr/bin/python3, the style
// of the decay rule's public reference code). Not a test: figures and ratios to read.
//
//   fwlab-bench-decay [--threads N] [--repeats R] [--forms fused,chunked,naive,torchscript] [--sizes B:H:T:D:M,...]
//
// Time: median of R runs after warm-up runs, forward + backward (y.backward(g)) and forward alone (no graph).
// FLOPs: the forward does 6 D M per token and head (decay both sides of S: 2, write v k^T: 2, read S q: 2);
// forward + backward is counted as 3 x that (the usual convention; the fused backward's recomputation of
// states is overhead, not counted). Memory: each form runs once in a child process of its own; its op memory
// is the child's peak resident set (VmHWM) above its resident set once the inputs exist, measured, not
// computed, against B H T D M x 4 bytes, the memory of storing every state.
#include <torch/torch.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/blas_core.h"
#include "kernels/memory_policy.h"
#include "kernels/decay/decay.h"

namespace K = fwlab::kernels;

namespace {

struct Size {
  int64_t B, H, T, D, M;
  std::string str() const {
    return D == M ? fmt::format("B{} H{} T{} D=M={}", B, H, T, D) : fmt::format("B{} H{} T{} D={} M={}", B, H, T, D, M);
  }
  double state_bytes() const { return 4.0 * static_cast<double>(B * H * T * D * M); }
  double forward_flops() const { return 6.0 * static_cast<double>(B * H * T * D * M); }
};

struct Inputs {
  torch::Tensor q, k, v, log_a, log_b, gy;
};

Inputs make_inputs(const Size& s) {
  torch::manual_seed(0);
  auto opt = torch::TensorOptions().dtype(torch::kFloat32).requires_grad(true);
  Inputs in;
  in.q = torch::randn({s.B, s.H, s.T, s.M}, opt);
  in.k = torch::randn({s.B, s.H, s.T, s.M}, opt);
  in.v = torch::randn({s.B, s.H, s.T, s.D}, opt);
  in.log_a = torch::log_sigmoid(torch::randn({s.B, s.H, s.T, s.D}) + 2.0).requires_grad_(true);
  in.log_b = torch::log_sigmoid(torch::randn({s.B, s.H, s.T, s.M}) + 2.0).requires_grad_(true);
  in.gy = torch::randn({s.B, s.H, s.T, s.D});
  return in;
}

torch::Tensor run_form(const std::string& form, const Inputs& in) {
  if (form == "fused") return K::decay_recurrence_fused(in.q, in.k, in.v, in.log_a, in.log_b, {}).y;
  if (form == "chunked")
    return K::decay_recurrence_chunked(in.q, in.k, in.v, in.log_a, in.log_b, {}, 8).y;  // the model's chunk for decay
  return K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, {}).y;
}

void run_once(const std::string& form, const Inputs& in, bool backward) {
  if (!backward) {
    torch::NoGradGuard no_grad;
    run_form(form, in);
    return;
  }
  for (const auto& t : {in.q, in.k, in.v, in.log_a, in.log_b}) t.mutable_grad() = torch::Tensor();
  run_form(form, in).backward(in.gy);  // the gradient g of y given directly: no extra [B, H, T, D] tensors
}

double median_ms(int repeats, int warmups, const std::function<void()>& body) {
  for (int w = 0; w < warmups; ++w) body();  // the first runs pay for fresh pages (malloc's thresholds settle)
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field)));
  return -1;
}

// Child mode: one fwd+bwd of one form; prints the op's peak memory above the baseline in bytes.
int measure_memory(const std::string& form, const Size& s) {
  run_once(form, make_inputs({1, 1, 16, s.D, s.M}), true);  // libraries and threads start before the baseline
  const auto in = make_inputs(s);
  const int64_t baseline = status_kib("VmRSS:");
  run_once(form, in, true);
  fmt::print("{}\n", (status_kib("VmHWM:") - baseline) * 1024);
  return 0;
}

std::string self_exe() {
  char buf[4096];
  const auto n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

std::string capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

struct Figures {
  double fwdbwd_ms = -1, fwd_ms = -1, op_bytes = -1;
};

Figures cpp_form(const std::string& form, const Size& s, int repeats, int threads) {
  const auto in = make_inputs(s);
  Figures f;
  const int r = form == "naive" ? std::min(repeats, 2) : repeats;  // the loop is slow; its spread is small
  const int warmups = form == "naive" ? 1 : 3;
  f.fwdbwd_ms = median_ms(r, warmups, [&] { run_once(form, in, true); });
  f.fwd_ms = median_ms(r, warmups, [&] { run_once(form, in, false); });
  const auto mem = capture(fmt::format("env -u OPENBLAS_CORETYPE {} --memory {} {} {} {} {} {} --threads {}",
                                       self_exe(), form, s.B, s.H, s.T, s.D, s.M, threads));
  f.op_bytes = mem.empty() ? -1 : std::stod(mem);
  return f;
}

Figures torchscript_form(const Size& s, int repeats, int threads) {
  const auto out = capture(
      fmt::format("env -u OPENBLAS_CORETYPE /usr/bin/python3 {}/bench/decay_torchscript.py {} {} {} {} {} {} {} 2>&1",
                  FWLAB_SOURCE_DIR, s.B, s.H, s.T, s.D, s.M, std::min(repeats, 2), threads));
  Figures f;
  std::istringstream lines(out);
  std::string key;
  double value;
  while (lines >> key >> value) {
    if (key == "fwdbwd_ms") f.fwdbwd_ms = value;
    if (key == "fwd_ms") f.fwd_ms = value;
    if (key == "op_bytes") f.op_bytes = value;
  }
  if (f.fwdbwd_ms < 0) fmt::print(stderr, "torchscript form failed: {}\n", out);
  return f;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  int threads = static_cast<int>(std::thread::hardware_concurrency()), repeats = 5;
  std::vector<std::string> forms = {"fused", "chunked", "naive", "torchscript"};
  std::vector<Size> sizes = {{16, 4, 256, 32, 32}, {4, 4, 1024, 32, 32}, {1, 4, 4096, 32, 32}, {4, 4, 1024, 64, 64}};
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--threads") threads = std::stoi(args[i + 1]);
  }
  fwlab::keep_freed_memory_mapped();  // as fwlab-worker runs, with subnormals flushed to zero
  at::globalContext().setFlushDenormal(true);
  torch::set_num_threads(threads);
  if (!args.empty() && args[0] == "--memory" && args.size() >= 7)
    return measure_memory(args[1], {std::stoll(args[2]), std::stoll(args[3]), std::stoll(args[4]), std::stoll(args[5]),
                                    std::stoll(args[6])});
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--repeats")
      repeats = std::stoi(args[i + 1]);
    else if (args[i] == "--forms")
      forms = split(args[i + 1], ',');
    else if (args[i] == "--sizes") {
      sizes.clear();
      for (const auto& spec : split(args[i + 1], ',')) {
        const auto p = split(spec, ':');
        sizes.push_back(
            {std::stoll(p.at(0)), std::stoll(p.at(1)), std::stoll(p.at(2)), std::stoll(p.at(3)), std::stoll(p.at(4))});
      }
    } else if (args[i] != "--threads") {
      fmt::print(stderr, "fwlab-bench-decay: unknown argument '{}'\n", args[i]);
      return 2;
    }
  }
  fmt::print(
      "decay recurrence, float32, two-sided log-gates, {} threads, median of {} runs (naive and TorchScript: 2)\n",
      threads, repeats);
  fmt::print(
      "GFLOP/s: forward 6 D M per token and head, forward + backward 3x that; op memory: peak RSS above the inputs,\n"
      "one child process per form, against storing every state (B H T D M x 4 bytes)\n\n");
  std::map<std::string, std::map<std::string, Figures>> all;
  for (const auto& s : sizes) {
    fmt::print("{}  (all states: {:.1f} MB)\n", s.str(), s.state_bytes() / 1e6);
    fmt::print("  {:<12} {:>11} {:>9} {:>11} {:>9} {:>11} {:>10} {:>13}\n", "form", "fwd+bwd ms", "GFLOP/s", "fwd ms",
               "GFLOP/s", "op MB", "/ states", "fused faster");
    for (const auto& form : forms) {
      const auto f =
          form == "torchscript" ? torchscript_form(s, repeats, threads) : cpp_form(form, s, repeats, threads);
      all[s.str()][form] = f;
      const auto& fused = all[s.str()].count("fused") ? all[s.str()]["fused"] : f;
      fmt::print("  {:<12} {:>11.1f} {:>9.2f} {:>11.1f} {:>9.2f} {:>11.1f} {:>10.3f} {:>12.1f}x\n", form, f.fwdbwd_ms,
                 3 * s.forward_flops() / (f.fwdbwd_ms * 1e6), f.fwd_ms, s.forward_flops() / (f.fwd_ms * 1e6),
                 f.op_bytes / 1e6, f.op_bytes / s.state_bytes(), f.fwdbwd_ms / fused.fwdbwd_ms);
    }
    fmt::print("\n");
  }
  // Linearity in T: per-token time at T = 4096 (B1) against T = 1024 (B4), the same number of tokens.
  const auto t1024 = Size{4, 4, 1024, 32, 32}.str(), t4096 = Size{1, 4, 4096, 32, 32}.str();
  for (const auto& form : forms)
    if (all[t1024].count(form) && all[t4096].count(form))
      fmt::print(
          "{:<12} time at B1 T4096 / time at B4 T1024 (same tokens; 1.00 = linear in T): fwd+bwd {:.2f}, fwd {:.2f}\n",
          form, all[t4096][form].fwdbwd_ms / all[t1024][form].fwdbwd_ms,
          all[t4096][form].fwd_ms / all[t1024][form].fwd_ms);
  return 0;
}
