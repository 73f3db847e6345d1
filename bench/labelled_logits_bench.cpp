// The output layer at the labelled positions only (GPT::labelled_logits), and that layer fused with the loss as the
// trainer runs it (kernels/cross_entropy/linear_cross_entropy_cpu.h), against the full output layer with ignored
// labels, side by side on MQAR batches: one training step (forward, loss, backward) of the setting
// (Zoology's: vocabulary 8192, length 64, 4 pairs, d 64, 1 head, batch 64; --length 256 --pairs 64 is its longest
// training point, 4,096 labelled rows). Prints the medians and their ratios.
// Usage: fwlab-bench-labelled-logits [--vocab V] [--length L] [--pairs P] [--threads N] [--repeats R]
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <string>

#include "kernels/blas_core.h"
#include "kernels/cross_entropy/linear_cross_entropy_cpu.h"
#include "bench/timing.h"
#include "kernels/decay/kernel_guard.h"
#include "models/gpt.h"
#include "text/batches/mqar.h"

using namespace fwlab;

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  fwlab::kernels::set_kernel_self_check(
      false);  // timed as they are: no first-use check inside the timings (kernel_guard.h)
  int64_t vocab = 8192, length = 64, pairs = 4, threads = 2, repeats = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--vocab")
      vocab = value;
    else if (flag == "--length")
      length = value;
    else if (flag == "--pairs")
      pairs = value;
    else if (flag == "--threads")
      threads = value;
    else if (flag == "--repeats")
      repeats = value;
    else {
      fmt::print(stderr, "unknown option {}\n", flag);
      return 2;
    }
  }
  torch::set_num_threads(static_cast<int>(threads));
  at::globalContext().setFlushDenormal(true);  // as the worker runs (worker/main.cpp)
  torch::manual_seed(0);
  MixerSpec softmax;
  softmax.kind = "softmax";
  ModelConfig cfg;
  cfg.vocab = vocab, cfg.d_model = 64, cfg.n_layers = 2, cfg.n_heads = 1, cfg.head_dim = 64, cfg.context = length,
  cfg.dropout = 0.0;
  apply_plan(cfg, LayerPlan{softmax});
  GPT model(cfg);
  const MqarSpec mqar{vocab, length, pairs, 0.01};
  const auto batch = make_mqar_batch(mqar, 64, 1);
  const auto x = torch::tensor(batch.inputs).view({64, length}).to(torch::kLong),
             y = torch::tensor(batch.targets).view({64, length}).to(torch::kLong);
  const auto full_step = [&] {
    model->zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x).reshape({-1, vocab}), y.reshape({-1}),
                                         torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1))
        .backward();
  };
  const auto labelled_step = [&] {
    model->zero_grad();
    auto [logits, targets] = model->labelled_logits(x, y);
    torch::nn::functional::cross_entropy(logits, targets).backward();
  };
  const auto fused_step = [&] {
    model->zero_grad();
    auto [rows, targets] = model->labelled_features(x, y);
    kernels::linear_cross_entropy_mean(rows, model->head_weight(), targets).backward();
  };
  // Alternating rounds, so that neither side always runs on a warmer cache; the median of each side's rounds.
  std::vector<double> full_rounds, labelled_rounds, fused_rounds;
  for (int round = 0; round < 3; ++round) {
    labelled_rounds.push_back(bench::median_seconds(static_cast<int>(repeats), labelled_step));
    fused_rounds.push_back(bench::median_seconds(static_cast<int>(repeats), fused_step));
    full_rounds.push_back(bench::median_seconds(static_cast<int>(repeats), full_step));
  }
  for (auto* r : {&full_rounds, &labelled_rounds, &fused_rounds}) std::sort(r->begin(), r->end());
  const double full = full_rounds[1], labelled = labelled_rounds[1], fused = fused_rounds[1];
  for (auto [name, r] : {std::pair{"full", &full_rounds}, {"labelled", &labelled_rounds}, {"fused", &fused_rounds}})
    fmt::print("rounds (ms), {}: {:.1f} {:.1f} {:.1f}\n", name, 1e3 * (*r)[0], 1e3 * (*r)[1], 1e3 * (*r)[2]);
  fmt::print("MQAR step (vocab {}, length {}, {} pairs, d 64, 2 layers, batch 64, {} threads), median of {}:\n", vocab,
             length, pairs, threads, repeats);
  fmt::print("  full output layer, ignored labels:      {:8.1f} ms\n", 1e3 * full);
  fmt::print("  labelled positions only:                {:8.1f} ms  ({:.1f}x)\n", 1e3 * labelled, full / labelled);
  fmt::print("  labelled, output layer fused with loss: {:8.1f} ms  ({:.1f}x; {:.2f}x the unfused labelled step)\n",
             1e3 * fused, full / fused, labelled / fused);
  return 0;
}
