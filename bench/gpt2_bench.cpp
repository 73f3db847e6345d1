// GPT-2 on the CPU, from a Hugging Face directory: forward and forward+backward tokens/s (compared with Python
// PyTorch by bench/gpt2_bench.sh), and greedy generation tokens/s with 128 and 1024 tokens of context, softmax vs
// the same model converted to decay. Prints JSON lines. Not a test: timings on a shared machine are noisy.
//
//   fwlab-bench-gpt2 DIR [--threads N] [--batch B] [--seq T] [--repeats R] [--gen-tokens N] [--m M]
#include <torch/torch.h>

#include <fmt/format.h>

#include <thread>

#include "kernels/blas_core.h"
#include "bench/timing.h"
#include "kernels/memory_policy.h"
#include "models/convert.h"
#include "models/generate.h"
#include "models/hf_import.h"

using namespace fwlab;
using fwlab::bench::generation_rate;
using fwlab::bench::median_seconds;

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  if (argc < 2) {
    fmt::print(
        stderr,
        "usage: fwlab-bench-gpt2 DIR [--threads N] [--batch B] [--seq T] [--repeats R] [--gen-tokens N] [--m M]\n");
    return 2;
  }
  keep_freed_memory_mapped();
  at::globalContext().setFlushDenormal(true);
  const std::string dir = argv[1];
  int threads = static_cast<int>(std::thread::hardware_concurrency()), repeats = 3;
  int64_t batch = 1, seq = 256, gen_tokens = 16, m = 32;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int64_t value = std::stoll(argv[i + 1]);
    if (key == "--threads")
      threads = static_cast<int>(value);
    else if (key == "--batch")
      batch = value;
    else if (key == "--seq")
      seq = value;
    else if (key == "--repeats")
      repeats = static_cast<int>(value);
    else if (key == "--gen-tokens")
      gen_tokens = value;
    else if (key == "--m")
      m = value;
    else {
      fmt::print(stderr, "fwlab-bench-gpt2: unknown option {}\n", key);
      return 2;
    }
  }
  torch::set_num_threads(threads);
  auto model = load_hf(dir).model;
  model->eval();  // no dropout on either side: the same arithmetic as the Python baseline
  const auto& cfg = model->config();
  auto ids = torch::randint(0, cfg.vocab, {batch, seq + 1}, torch::kLong);
  auto x = ids.narrow(1, 0, seq), y = ids.narrow(1, 1, seq);
  const double tokens = static_cast<double>(batch * seq);
  const double fwd = median_seconds(repeats, [&] {
    torch::NoGradGuard guard;
    model->forward(x);
  });
  const double train = median_seconds(repeats, [&] {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    auto logits = model->forward(x);
    torch::nn::functional::cross_entropy(logits.reshape({-1, cfg.vocab}), y.reshape({-1})).backward();
  });
  fmt::print(
      "{{\"params\": {}, \"threads\": {}, \"batch\": {}, \"seq\": {}, \"forward_tokens_per_s\": {:.1f}, "
      "\"train_tokens_per_s\": {:.1f}}}\n",
      model->num_parameters(), threads, batch, seq, tokens / fwd, tokens / train);

  auto decay_cfg = cfg;
  MixerSpec decay;
  decay.kind = "fast_weight";
  decay.rule = "decay";
  decay.feature_map = "identity";
  decay.norm = "none";
  decay.m = m;
  apply_plan(decay_cfg, LayerPlan{decay});
  auto decay_model = convert_model(model, decay_cfg, 0).model;
  decay_model->eval();
  // "128" and "1024" tokens of context: the timed tokens start at 128, and end at the model's full context.
  for (int64_t length : {int64_t{128}, cfg.context - gen_tokens}) {
    if (length < 0 || length + gen_tokens > cfg.context) continue;
    for (auto& [name, mdl] :
         std::vector<std::pair<std::string, GPT*>>{{"softmax", &model}, {fmt::format("decay m={}", m), &decay_model}}) {
      const double rate = generation_rate(*mdl, length, gen_tokens);
      fmt::print("{{\"generation\": \"{}\", \"context\": \"{}-{}\", \"tokens_per_s\": {:.2f}}}\n", name, length,
                 length + gen_tokens, rate);
    }
  }
  return 0;
}
