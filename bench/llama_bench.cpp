// The Llama family on the CPU, side by side in one run (issue 26's benchmark):
//   1. loading a 1B-shaped Llama directory (Llama 3.2 1B's config, random bf16 weights, written here) computing in
//      the file's dtype and in float32: time and the loading process's peak resident memory (measured in a child
//      process, so the writing does not count);
//   2. one fine-tuning step (forward, backward, AdamW) at T = 1024 in a 100M-shaped Llama: softmax vs decay vs gated
//      delta, every layer converted;
//   3. generation: per-token ms with 4,096 tokens of context, softmax with its grouped-query KV cache vs decay m = 32.
// Not a test: timings on a shared machine are noisy.
//
//   fwlab-bench-llama [--dir DIR (default /tmp/fwlab-llama-1b)] [--threads N] [--skip-load | --load-only]
//   fwlab-bench-llama load DIR DTYPE   (the child: loads DIR with model.dtype DTYPE, prints seconds and peak RSS)
#include <torch/torch.h>
#include <torch/version.h>

#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "kernels/blas_core.h"
#include "bench/timing.h"
#include "contract/formats/hf/family.h"
#include "kernels/decay/kernel_guard.h"
#include "models/checkpoint.h"
#include "models/hf_import.h"

using namespace fwlab;
namespace fs = std::filesystem;

namespace {

// Llama 3.2 1B's config.json values.
ModelConfig llama_1b() {
  ModelConfig c;
  c.vocab = 128256, c.d_model = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 64, c.d_ff = 8192;
  c.context = 131072, c.ln_eps = 1e-5, c.dropout = 0.0;
  c.block_norm = "rmsnorm", c.positions = "rope", c.mlp = "gated", c.activation = "silu", c.tied_head = true;
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
  c.rope = RopeSpec{500000.0, "llama3", 32.0, 1.0, 4.0, 8192};
  c.layers.assign(16, MixerSpec{});
  return c;
}

// A 100M-shaped Llama (8 layers of d 768, 12 query heads on 4 key/value heads, a 32,000-token vocabulary).
ModelConfig llama_100m(const MixerSpec& mixer) {
  auto c = llama_1b();
  c.vocab = 32000, c.d_model = 768, c.n_layers = 8, c.n_heads = 12, c.n_kv_heads = 4, c.head_dim = 64, c.d_ff = 2048;
  c.context = 8192, c.tied_head = false, c.rope = RopeSpec{};
  apply_plan(c, LayerPlan{mixer});
  return c;
}

MixerSpec fast_weight(const std::string& rule, int64_t m) {
  MixerSpec s;
  s.kind = "fast_weight", s.rule = rule, s.feature_map = "hedgehog", s.norm = rule == "add" ? "attn" : "none", s.m = m;
  return s;
}

// Writes DIR as Hugging Face would (random bf16 weights), unless it is there already.
void write_1b(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return;
  torch::NoGradGuard guard;
  const auto cfg = llama_1b();
  NamedTensors tensors;
  for (const auto& n : hf_names(cfg))
    if (n.op != HfOp::tied) tensors.emplace_back(n.hf, (torch::randn(n.shape) * 0.02).to(torch::kBFloat16));
  fs::create_directories(dir);
  save_tensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream((dir / "config.json").string()) << hf_config_json(cfg).dump(2);
}

int load_child(const std::string& dir, const std::string& dtype) {
  torch::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  const double s = bench::seconds([&] { load_hf(dir, dtype); });
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  fmt::print("{:.2f} {:.2f}\n", s, static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0));
  return 0;
}

// Loads the directory in a child process per model.dtype: the time and peak RSS, against the file (as it computes in
// its own dtype) and against the model's float32 size (when it computes in float32, the default).
void bench_load(const std::string& self, const fs::path& dir) {
  const double write_s = bench::seconds([&] { write_1b(dir); });
  const auto file_gib = static_cast<double>(fs::file_size(dir / "model.safetensors")) / (1 << 30);
  const auto n = count_parameters(llama_1b());
  const double fp32_gib = static_cast<double>(n) * 4 / (1 << 30);
  fmt::print(
      "load  1B-shaped Llama ({:.3f}B parameters, {:.2f} GiB bf16 on disk, {:.2f} GiB in float32; written in {:.1f} s; "
      "the file in the page cache):\n",
      static_cast<double>(n) / 1e9, file_gib, fp32_gib, write_s);
  for (const auto& [dtype, reference, what] : std::vector<std::tuple<std::string, double, std::string>>{
           {"file", file_gib, "the file"}, {"float32", fp32_gib, "the float32 model"}}) {
    std::FILE* p = popen(fmt::format("'{}' load '{}' {}", self, dir.string(), dtype).c_str(), "r");
    double seconds = 0, gib = 0;
    if (!p || std::fscanf(p, "%lf %lf", &seconds, &gib) != 2) throw std::runtime_error("the loading child failed");
    pclose(p);
    fmt::print("      model.dtype = {:<8} {:.2f} s, peak RSS {:.2f} GiB ({:.2f} x {})\n", dtype, seconds, gib,
               gib / reference, what);
  }
}

void bench_steps() {
  const int64_t T = 1024;
  double softmax_s = 0;
  for (const auto& [name, mixer] :
       std::vector<std::pair<std::string, MixerSpec>>{{"softmax", MixerSpec{}},
                                                      {"decay m=32", fast_weight("decay", 32)},
                                                      {"gated_delta m=32", fast_weight("gated_delta", 32)}}) {
    torch::manual_seed(0);
    GPT model(llama_100m(mixer));
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-4));
    auto idx = torch::randint(0, 32000, {1, T + 1}, torch::kLong);
    auto step = [&] {
      opt.zero_grad();
      auto logits = model->forward(idx.narrow(1, 0, T));
      torch::nn::functional::cross_entropy(logits.view({T, -1}), idx.narrow(1, 1, T).reshape({T})).backward();
      opt.step();
    };
    const double s = bench::median_seconds(3, step);
    if (name == "softmax") softmax_s = s;
    fmt::print("step  100M-shaped Llama ({:.1f}M parameters), T = {}, batch 1, {:<16} {:7.0f} ms  ({:.2f} x softmax)\n",
               static_cast<double>(model->num_parameters()) / 1e6, T, name + ":", s * 1e3, s / softmax_s);
  }
}

// Per-token ms once the context holds `context` tokens: softmax's cache is filled to that length directly (its
// contents do not change the cost), a recurrent state is the same size at any length.
double per_token_ms(GPT& model, int64_t context) {
  torch::NoGradGuard guard;
  model->eval();
  GenerationState state;
  auto tok = torch::zeros({1}, torch::kLong);
  model->step(tok, state);
  for (auto& layer : state.layers)
    if (layer.k.defined()) {
      auto fill = [&](torch::Tensor& buffer, torch::Tensor& cache) {
        buffer = torch::randn({1, cache.size(1), 2 * context, cache.size(3)});
        cache = buffer.narrow(2, 0, context);
      };
      fill(layer.k_buffer, layer.k), fill(layer.v_buffer, layer.v);
    }
  state.position = context;
  return bench::median_seconds(50,
                               [&] {
                                 auto s = state;  // the same context length at every timed token
                                 model->step(tok, s);
                               }) *
         1e3;
}

void bench_generation() {
  const int64_t context = 4096;
  GPT softmax(llama_100m(MixerSpec{})), decay(llama_100m(fast_weight("decay", 32)));
  const double a = per_token_ms(softmax, context), b = per_token_ms(decay, context);
  const auto cache = state_size(softmax->config()).elements_at(context),
             fixed = state_size(decay->config()).elements_at(context);
  fmt::print(
      "generate  100M-shaped Llama, {} tokens of context: softmax (GQA 12 -> 4 heads KV cache, {:.1f} MB) {:.2f} "
      "ms/token; "
      "decay m=32 (state {:.1f} MB) {:.2f} ms/token; softmax / decay = {:.2f}\n",
      context, static_cast<double>(cache) * 4 / 1e6, a, static_cast<double>(fixed) * 4 / 1e6, b, a / b);
}

}  // namespace

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  fwlab::kernels::set_kernel_self_check(false);  // timed as they are (kernel_guard.h)
  if (argc == 4 && std::string(argv[1]) == "load") return load_child(argv[2], argv[3]);
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  fs::path dir = "/tmp/fwlab-llama-1b";
  bool skip_load = false, load_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (key == "--threads" && i + 1 < argc)
      threads = std::stoi(argv[++i]);
    else if (key == "--skip-load")
      skip_load = true;
    else if (key == "--load-only")
      load_only = true;
    else
      return fmt::print(stderr, "fwlab-bench-llama: unknown argument '{}'\n", key), 2;
  }
  torch::set_num_threads(threads);
  fmt::print("fwlab-bench-llama: {} threads, libtorch {}\n", threads, TORCH_VERSION);
  if (!skip_load) bench_load(fs::canonical("/proc/self/exe").string(), dir);
  if (load_only) return 0;
  bench_steps();
  bench_generation();
  return 0;
}
