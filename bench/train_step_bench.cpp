// Forward + backward time of one training step for several mixers on the same model size, measured side by
// side in one run (the figures the model-zoo issue asks for). Not a test: timings on a shared machine are noisy.
//
//   fwlab-bench-train-step [--steps N] [--threads N] [--batch B] [--seq T] [--m M] [--chunk C] [--mixers a,b,...]
#include <torch/torch.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "kernels/blas_core.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/memory_policy.h"
#include "models/gpt.h"

using namespace fwlab;

namespace {

MixerSpec mixer_named(const std::string& full_name) {
  const std::string name = full_name.substr(0, full_name.find('-'));  // "<mixer>-naive": the reference kernels
  MixerSpec s;
  if (name == "softmax") return s;
  if (name == "local") {
    s.kind = "local";
    return s;
  }
  if (name == "sru" || name == "srupp") {
    s.kind = name;
    return s;
  }
  // a fast-weight rule with Mao's phi-off configuration at m = 4
  s.kind = "fast_weight";
  s.rule = name;
  s.feature_map = "identity";
  s.norm = "none";
  s.m = 4;
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  fwlab::use_the_cpus_blas_kernels();  // kernels/blas_core.h: not the generic kernels on a CPU OpenBLAS does not know
  fwlab::kernels::set_kernel_self_check(
      false);         // timed as they are: no first-use check inside the timings (kernel_guard.h)
  int64_t chunk = 0;  // 0: the rule's default
  int64_t m = 4;      // feature (state key) size of the fast-weight rules
  int steps = 10, threads = static_cast<int>(std::thread::hardware_concurrency()), batch = 16, seq = 256;
  std::string mixers = "softmax,decay,decay-naive";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i], value = argv[i + 1];
    if (key == "--steps")
      steps = std::stoi(value);
    else if (key == "--threads")
      threads = std::stoi(value);
    else if (key == "--batch")
      batch = std::stoi(value);
    else if (key == "--seq")
      seq = std::stoi(value);
    else if (key == "--mixers")
      mixers = value;
    else if (key == "--chunk")
      chunk = std::stoll(value);
    else if (key == "--m")
      m = std::stoll(value);
    else {
      fmt::print(stderr, "fwlab-bench-train-step: unknown argument '{}'\n", key);
      return 2;
    }
  }
  fwlab::keep_freed_memory_mapped();  // as fwlab-worker runs, with subnormals flushed to zero
  at::globalContext().setFlushDenormal(true);
  torch::set_num_threads(threads);
  fmt::print(
      "one training step (forward + backward), B={} T={} d_model=128 layers=4 heads=4 vocab=256, m={} for the "
      "fast-weight "
      "rules, {} threads, median of {} steps\n",
      batch, seq, m, threads, steps);
  fmt::print("{:<14} {:>12} {:>10} {:>14}\n", "mixer", "ms/step", "tokens/s", "vs softmax");
  std::map<std::string, double> ms;
  size_t pos = 0;
  while (pos <= mixers.size()) {
    size_t end = mixers.find(',', pos);
    if (end == std::string::npos) end = mixers.size();
    const std::string name = mixers.substr(pos, end - pos);
    pos = end + 1;
    ModelConfig cfg;
    cfg.context = seq;
    cfg.dropout = 0.1;
    auto spec = mixer_named(name);
    spec.chunk = chunk;
    if (spec.kind == "fast_weight") spec.m = m;
    apply_plan(cfg, LayerPlan{spec});
    torch::manual_seed(0);
    GPT model(cfg);
    model->train();
    if (name.find("-naive") != std::string::npos) model->set_reference_kernels(true);
    auto idx = torch::randint(0, cfg.vocab, {batch, seq + 1}, torch::kLong);
    auto x = idx.narrow(1, 0, seq), y = idx.narrow(1, 1, seq);
    std::vector<double> times;
    for (int s = 0; s < steps + 2; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      model->zero_grad();
      auto logits = model->forward(x);
      auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, cfg.vocab}), y.reshape({-1}));
      loss.backward();
      auto t1 = std::chrono::steady_clock::now();
      if (s >= 2) times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());  // 2 warm-up steps
    }
    ms[name] = median(times);
    const double base = ms.count("softmax") ? ms["softmax"] : ms[name];
    fmt::print("{:<14} {:>12.1f} {:>10.0f} {:>13.2f}x\n", name, ms[name], batch * seq / (ms[name] / 1000.0),
               ms[name] / base);
  }
  return 0;
}
