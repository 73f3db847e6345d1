// The GPU benchmark of issue 13, one run, figures and ratios side by side (JSON lines, then a table):
//
// Op level (bf16 inputs, head dim D = 64, m = 32 and 64, T = 1k, 4k, 16k at a fixed number of tokens per batch,
// forward and forward + backward): the chunked CUDA decay kernel; the fused recurrent CUDA twin (fp32, the only
// precision it has); the libtorch chunked form (fp32: its states follow the input dtype); the gated delta and delta
// rules (m = 64) as the chunked CUDA kernel (bf16 in), the libtorch WY chunk form and the per-step loop; softmax
// attention through scaled_dot_product_attention (libtorch >= 2.0, flash attention where libtorch picks it; an explicit
// masked softmax before). Reported: ms, TFLOP/s
// against the stated FLOP count, peak GPU memory, and the memory the reference kernel's approach needs (every S_t
// and its gradient, fp16: 2 * 2 * B*H*T*D*m bytes).
//   FLOPs, per head and token: decay forward 4*D*m (state write and read) + C*(m + D) (in-chunk pairs, C = 64);
//   gated delta forward 6*D*m (S k, the rank-one update, S q); causal softmax forward 2*T*D (half of QK^T and PV); a
//   backward counts 2x the forward for decay and 2.5x for softmax (FlashAttention's convention).
//
// Model level (bf16 autocast, GPT-2-small sized: 12 layers, d 768, 12 heads): a training step (forward, backward,
// AdamW) of all-decay m = 32 vs all-softmax at T = 1024 and 4096 with 16k tokens per step: tokens/s and peak
// memory; and greedy generation per token with 4096 and 32768 tokens of context (softmax with its KV cache, filled
// with random rows rather than generated: bench/timing.h, generation_rate_prefilled), through the usual step and as
// one CUDA graph replay per token (models/decode_graph.h; softmax with a static cache; graph_captured false where
// it ran uncaptured: the CPU, or a libtorch without CUDA).
//
//   fwlab-bench-gpu [--tokens N] [--repeats R] [--only ops|model] [--smoke]
// --smoke: tiny sizes (and the CPU where no GPU is), to check the program itself.
#include <torch/torch.h>
#include <torch/version.h>

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#if defined(FWLAB_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "kernels/blas_core.h"
#include "bench/timing.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/decay/decay.h"
#include "kernels/delta/delta.h"
#include "models/gpt.h"
#include "worker/precision.h"

using namespace fwlab;
namespace K = fwlab::kernels;

namespace {

struct Options {
  int64_t tokens = 32768;  // per batch, op level
  int repeats = 5;
  std::string only;
  bool smoke = false;
  torch::Device device = torch::kCUDA;
};

void wait_device(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

// Peak bytes allocated by libtorch on the GPU since the last reset (-1: not measurable with this libtorch).
void reset_peak(const torch::Device& d) {
#if defined(FWLAB_TORCH_CUDA)
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(d.index() < 0 ? 0 : d.index());
#endif
  (void)d;
}
int64_t peak_bytes(const torch::Device& d) {
#if defined(FWLAB_TORCH_CUDA)
  if (d.is_cuda())
    return c10::cuda::CUDACachingAllocator::getDeviceStats(d.index() < 0 ? 0 : d.index()).allocated_bytes[0].peak;
#endif
  (void)d;
  return -1;
}

struct Measure {
  double ms = 0;
  int64_t peak = -1;
};

// Median time of `f` and the peak memory of one run of it (inputs already allocated count too).
Measure measure(const Options& o, const std::function<void()>& f) {
  Measure m;
  wait_device(o.device);
  reset_peak(o.device);
  m.ms = 1e3 * bench::median_seconds(o.repeats, f, [&] { wait_device(o.device); });
  m.peak = peak_bytes(o.device);
  return m;
}

torch::Tensor causal_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  if (q.is_cuda()) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#endif
  const int64_t T = q.size(2);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(3)));
  auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  return torch::matmul(torch::softmax(scores.masked_fill(future, -INFINITY), -1), v);
}

// One form of an op at one shape: its forward, the FLOPs counted for it, and the backward's factor.
struct Row {
  std::string form;
  std::function<torch::Tensor()> forward;
  double fwd_flops, bwd_factor;
  int repeats = 0;  // 0: the options' repeats
};

// Times each row (forward alone, forward + backward) and prints it as a table line and a JSON line; ratios are
// against the first row.
void print_rows(const Options& o, const std::vector<Row>& rows, int64_t T, int64_t m, int64_t B,
                double all_states_mib) {
  double chunked_ms = 0;
  for (const auto& row : rows) {
    Options ro = o;
    if (row.repeats > 0) ro.repeats = std::min(o.repeats, row.repeats);
    const auto fwd = measure(ro, [&] {
      torch::NoGradGuard guard;
      row.forward();
    });
    const auto both = measure(ro, [&] { row.forward().to(torch::kFloat32).sum().backward(); });
    if (chunked_ms == 0) chunked_ms = both.ms;
    const double tflops = row.fwd_flops * row.bwd_factor / (both.ms * 1e-3) / 1e12;
    fmt::print("{:>6} {:>3} {:>36} {:>10.3f} {:>10.3f} {:>9.2f} {:>9.2f} {:>11.1f} {:>13.1f}\n", T, m, row.form, fwd.ms,
               both.ms, tflops, both.ms / chunked_ms, both.peak < 0 ? -1.0 : both.peak / double(1 << 20),
               all_states_mib);
    fmt::print(
        "{{\"level\": \"op\", \"T\": {}, \"m\": {}, \"batch\": {}, \"form\": \"{}\", \"fwd_ms\": {:.4f}, "
        "\"fwd_bwd_ms\": {:.4f}, "
        "\"tflops\": {:.3f}, \"peak_bytes\": {}, \"all_states_bytes\": {:.0f}}}\n",
        T, m, B, row.form, fwd.ms, both.ms, tflops, both.peak, all_states_mib * (1 << 20));
  }
}

// The delta family's rows (m = D: the gated delta rule's head is square in DeltaNet's layer, d_k = d_v), from the
// op level's fp32 q, k, v; every row captures its tensors by value.
void add_delta_rows(const Options& o, std::vector<Row>& rows, const torch::Tensor& q32, const torch::Tensor& k32,
                    const torch::Tensor& v32) {
  const int64_t B = q32.size(0), H = q32.size(1), T = q32.size(2), D = v32.size(3), m = q32.size(3);
  const double tokens_heads = static_cast<double>(B * T * H);
  const auto gates = torch::TensorOptions().dtype(torch::kFloat32).device(o.device);
  auto unit = [](const torch::Tensor& x) {
    return torch::nn::functional::normalize(x.detach(), torch::nn::functional::NormalizeFuncOptions().dim(-1))
        .requires_grad_(true);
  };
  const auto ku = unit(k32), qu = unit(q32);
  const auto alpha = torch::sigmoid(torch::randn({B, H, T, 1}, gates) + 3.0).requires_grad_(true);
  const auto beta = torch::sigmoid(torch::randn({B, H, T, 1}, gates)).requires_grad_(true);
  rows.push_back({"gated delta loop (fp32)",
                  [=] { return K::gated_delta_recurrence_fused(qu, ku, v32, alpha, beta, {}).y; },
                  tokens_heads * 6.0 * D * m, 3.0, 1});
  // The delta family's chunked CUDA kernel (kernels/delta/cuda/chunks.h), bf16 q, k, v as the model feeds it
  // under autocast; what a model runs on CUDA where its first-use check passes. bf16 runs the tensor-core
  // programs (chunks_mma.h); fp32 the same kernel's plain-loop programs, for the ratio between them.
  if (o.device.is_cuda() && K::cuda_kernels_built()) {
    auto bf = [](const torch::Tensor& x) { return x.detach().to(torch::kBFloat16).requires_grad_(true); };
    const auto qb = bf(qu), kb = bf(ku), vb = bf(v32);
    rows.push_back({"gated delta chunked CUDA (bf16)",
                    [=] { return K::gated_delta_recurrence_cuda_chunked(qb, kb, vb, alpha, beta, {}).y; },
                    tokens_heads * 6.0 * D * m, 3.0});
    rows.push_back({"gated delta chunked CUDA plain products (fp32)",
                    [=] { return K::gated_delta_recurrence_cuda_chunked(qu, ku, v32, alpha, beta, {}).y; },
                    tokens_heads * 6.0 * D * m, 3.0, 2});  // 2 repeats: a ratio, within bench-ops' time
    rows.push_back({"delta chunked CUDA (bf16)",
                    [=] { return K::gated_delta_recurrence_cuda_chunked(qb, kb, vb, {}, beta, {}).y; },
                    tokens_heads * 6.0 * D * m, 3.0});
  }
  // The libtorch WY chunk form, 64 steps a chunk (kernels/common/form_choice.h), with and without the gate: the
  // delta family's reference twin, and what a model runs on a GPU where the CUDA kernel does not.
  rows.push_back({"gated delta chunked libtorch (fp32)",
                  [=] { return K::gated_delta_recurrence_chunked(qu, ku, v32, alpha, beta, {}, 64).y; },
                  tokens_heads * 6.0 * D * m, 3.0});
  rows.push_back({"delta chunked libtorch (fp32)",
                  [=] { return K::delta_recurrence_chunked(qu, ku, v32, beta, {}, 64).y; }, tokens_heads * 6.0 * D * m,
                  3.0});
}

void op_level(const Options& o) {
  const int64_t H = 12, D = 64, C = 64;
  const std::vector<int64_t> lengths =
      o.smoke ? std::vector<int64_t>{128, 256} : std::vector<int64_t>{1024, 4096, 16384};
  fmt::print("\n== op level: bf16, H = {}, D = {}, {} tokens per batch ==\n", H, D, o.tokens);
  fmt::print("{:>6} {:>3} {:>36} {:>10} {:>10} {:>9} {:>9} {:>11} {:>13}\n", "T", "m", "form", "fwd ms", "fwd+bwd ms",
             "TFLOP/s", "x chunked", "peak MiB", "all-S_t MiB");
  for (const int64_t m : {int64_t{32}, int64_t{64}}) {
    for (const int64_t T : lengths) {
      const int64_t B = std::max<int64_t>(1, o.tokens / T);
      auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(o.device);
      auto rand = [&](std::vector<int64_t> shape, torch::TensorOptions opt) {
        return torch::randn(shape, opt).requires_grad_(true);
      };
      const auto q = rand({B, H, T, m}, bf16), k = rand({B, H, T, m}, bf16), v = rand({B, H, T, D}, bf16);
      const auto gates = torch::TensorOptions().dtype(torch::kFloat32).device(o.device);
      const auto log_a = (torch::log_sigmoid(torch::randn({B, H, T, D}, gates) + 2.0)).requires_grad_(true);
      const auto log_b = (torch::log_sigmoid(torch::randn({B, H, T, m}, gates) + 2.0)).requires_grad_(true);
      const double tokens_heads = static_cast<double>(B * T * H);
      const double decay_fwd_flops = tokens_heads * (4.0 * D * m + C * (m + D));
      const double all_states_mib = 2.0 * 2.0 * tokens_heads * D * m / (1 << 20);

      auto fp32 = [](const torch::Tensor& x) { return x.detach().to(torch::kFloat32).requires_grad_(true); };
      const auto q32 = fp32(q), k32 = fp32(k), v32 = fp32(v);
      std::vector<Row> rows;
      if (o.device.is_cuda() && K::cuda_kernels_built()) {
        rows.push_back({"decay chunked CUDA (bf16)",
                        [&] { return K::decay_recurrence_cuda_chunked(q, k, v, log_a, log_b, {}).y; }, decay_fwd_flops,
                        3.0});
        rows.push_back({"decay fused recurrent CUDA (fp32)",
                        [&] { return K::decay_recurrence_cuda_fused(q32, k32, v32, log_a, log_b, {}).y; },
                        decay_fwd_flops, 3.0});
      }
      rows.push_back({"decay chunked libtorch (fp32)",
                      [&] { return K::decay_recurrence_chunked(q32, k32, v32, log_a, log_b, {}, 16).y; },
                      decay_fwd_flops, 3.0});
      if (m == D) add_delta_rows(o, rows, q32, k32, v32);
      const auto qs = rand({B, H, T, D}, bf16), ks = rand({B, H, T, D}, bf16), vs = rand({B, H, T, D}, bf16);
      const bool fused_attention = TORCH_VERSION_MAJOR >= 2 && o.device.is_cuda();
      rows.push_back({fused_attention ? "softmax SDPA (bf16)" : "softmax explicit (bf16)",
                      [&] { return causal_softmax(qs, ks, vs); }, tokens_heads * 2.0 * T * D, 3.5});

      print_rows(o, rows, T, m, B, all_states_mib);
    }
  }
}

ModelConfig gpt2_small(const std::string& mixer, int64_t context, bool smoke) {
  ModelConfig cfg;
  cfg.vocab = 50257, cfg.context = context, cfg.d_model = 768, cfg.n_layers = 12, cfg.n_heads = 12, cfg.head_dim = 64;
  if (smoke) cfg.vocab = 256, cfg.d_model = 64, cfg.n_layers = 2, cfg.n_heads = 2, cfg.head_dim = 32;
  cfg.dropout = 0.0;
  MixerSpec s;
  if (mixer != "softmax") s.kind = "fast_weight", s.rule = mixer, s.feature_map = "identity", s.norm = "none", s.m = 32;
  if (mixer == "gated_delta") s.key_norm = "l2";  // Gated DeltaNet's keys (fla)
  cfg.layers.assign(static_cast<size_t>(cfg.n_layers), s);
  return cfg;
}

// Greedy decode ms per token at each context, through the usual step and through DecodeGraph (a CUDA graph replay
// per token where the model allows it: `captured`).
struct GenerationFigures {
  std::vector<double> eager_ms, graphed_ms;
  bool captured = false;
};

GenerationFigures generation_figures(GPT& model, const Options& o, const std::vector<int64_t>& contexts,
                                     int64_t tokens) {
  GenerationFigures f;
  const auto wait = [&] { wait_device(o.device); };
  for (const int64_t context : contexts) {
    f.eager_ms.push_back(1e3 / bench::generation_rate_prefilled(model, context, tokens, wait));
    f.graphed_ms.push_back(1e3 / bench::generation_rate_graphed(model, context, tokens, &f.captured, wait));
  }
  return f;
}

std::string ms_or(double ms, int digits, const char* none) {
  return std::isnan(ms) ? std::string(none) : fmt::format("{:.{}f}", ms, digits);
}

void model_level(const Options& o) {
  const int64_t tokens = o.smoke ? 512 : 16384, gen_tokens = o.smoke ? 4 : 32;
  const std::vector<int64_t> gen_contexts = o.smoke ? std::vector<int64_t>{64, 256} : std::vector<int64_t>{4096, 32768};
  const std::string precision = o.device.is_cuda() ? "bf16" : "fp32";
  fmt::print("\n== model level: GPT-2-small sized, {}, {} tokens per step ==\n", precision, tokens);
  fmt::print("{:>6} {:>11} {:>12} {:>10} {:>11} {:>10} {:>16} {:>16} {:>18} {:>18}\n", "T", "mixer", "tokens/s",
             "x softmax", "peak MiB", "1st step ms", fmt::format("gen ms/tok @{}", gen_contexts[0]),
             fmt::format("gen ms/tok @{}", gen_contexts[1]), fmt::format("graphed ms @{}", gen_contexts[0]),
             fmt::format("graphed ms @{}", gen_contexts[1]));
  for (const int64_t T : o.smoke ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{1024, 4096}) {
    double softmax_rate = 0;
    for (const std::string mixer : {"softmax", "decay", "gated_delta"}) {
      torch::manual_seed(0);
      GPT model(gpt2_small(mixer, std::max(T, gen_contexts.back() + gen_tokens), o.smoke));
      model->to(o.device);
      model->train();
      torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(6e-4));
      const int64_t B = std::max<int64_t>(1, tokens / T);
      auto ids = torch::randint(0, model->config().vocab, {B, T + 1},
                                torch::TensorOptions().dtype(torch::kLong).device(o.device));
      const auto x = ids.narrow(1, 0, T), y = ids.narrow(1, 1, T);
      auto step = [&] {
        opt.zero_grad();
        torch::Tensor loss;
        {
          const AutocastScope amp(precision, o.device);
          auto logits = model->forward(x);
          loss = torch::nn::functional::cross_entropy(K::widened_to_fp32(logits).reshape({-1, logits.size(-1)}),
                                                      y.reshape({-1}));
        }
        loss.backward();
        opt.step();
      };
      // The first step apart (form races, allocator and library set-up; the first-use checks are off here).
      const double first_ms = 1e3 * bench::seconds(step, [&] { wait_device(o.device); });
      const auto train = measure(o, step);
      const double rate = static_cast<double>(B * T) / (train.ms * 1e-3);
      if (mixer == "softmax") softmax_rate = rate;
      model->eval();
      // Once per mixer, at the first T: "-" in the table and null in the JSON line elsewhere.
      GenerationFigures gen{std::vector<double>(2, std::nan("")), std::vector<double>(2, std::nan(""))};
      if (T == 1024 || o.smoke) gen = generation_figures(model, o, gen_contexts, gen_tokens);
      fmt::print("{:>6} {:>11} {:>12.0f} {:>10.2f} {:>11.1f} {:>10.1f} {:>16} {:>16} {:>18} {:>18}\n", T, mixer, rate,
                 rate / softmax_rate, train.peak < 0 ? -1.0 : train.peak / double(1 << 20), first_ms,
                 ms_or(gen.eager_ms[0], 3, "-"), ms_or(gen.eager_ms[1], 3, "-"), ms_or(gen.graphed_ms[0], 3, "-"),
                 ms_or(gen.graphed_ms[1], 3, "-"));
      fmt::print(
          "{{\"level\": \"model\", \"T\": {}, \"mixer\": \"{}\", \"batch\": {}, \"tokens_per_s\": {:.1f}, "
          "\"peak_bytes\": {}, \"first_step_ms\": {:.1f}, "
          "\"generation_ms_per_token\": {{\"{}\": {}, \"{}\": {}}}, "
          "\"generation_ms_per_token_graphed\": {{\"{}\": {}, \"{}\": {}}}, \"graph_captured\": {}}}\n",
          T, mixer, B, rate, train.peak, first_ms, gen_contexts[0], ms_or(gen.eager_ms[0], 4, "null"), gen_contexts[1],
          ms_or(gen.eager_ms[1], 4, "null"), gen_contexts[0], ms_or(gen.graphed_ms[0], 4, "null"), gen_contexts[1],
          ms_or(gen.graphed_ms[1], 4, "null"), gen.captured);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  fwlab::kernels::set_kernel_self_check(
      false);  // timed as they are: no first-use check inside the timings (kernel_guard.h)
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(key + " needs a value");
      return argv[++i];
    };
    try {
      if (key == "--tokens")
        o.tokens = std::stoll(value());
      else if (key == "--repeats")
        o.repeats = std::stoi(value());
      else if (key == "--only")
        o.only = value();
      else if (key == "--smoke")
        o.smoke = true;
      else
        throw std::invalid_argument("unknown argument " + key);
    } catch (const std::exception& e) {
      fmt::print(
          stderr,
          "fwlab-bench-gpu: {}\nusage: fwlab-bench-gpu [--tokens N] [--repeats R] [--only ops|model] [--smoke]\n",
          e.what());
      return 2;
    }
  }
  if (!torch::cuda::is_available()) {
    if (!o.smoke) {
      fmt::print(stderr,
                 "fwlab-bench-gpu: no CUDA device visible to libtorch (a CPU-only libtorch, or no GPU); --smoke runs "
                 "the program on the CPU\n");
      return 77;
    }
    o.device = torch::kCPU, o.repeats = 1;
    if (o.tokens == Options{}.tokens) o.tokens = 512;
  }
  fmt::print("fwlab-bench-gpu: device {}, libtorch {}, fwlab CUDA kernels {}\n", o.device.str(), TORCH_VERSION,
             K::cuda_kernels_built() ? "built" : "not built");
  if (o.only.empty() || o.only == "ops") op_level(o);
  if (o.only.empty() || o.only == "model") model_level(o);
  return 0;
}
