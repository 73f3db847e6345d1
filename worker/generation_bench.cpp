// Generation benchmark (Mao Fig. 1; T2R's speed claims): time and memory per generated token as a function of
// the sequence length already generated, with the step form (KV cache for softmax, fixed state otherwise).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "contract/job/inputs.h"
#include "models/generate.h"
#include "worker/generation_metrics.h"
#include "worker/trainer.h"

namespace fwlab {

namespace {

// The job builds an encoder-decoder: from its model keys, or from its source checkpoint's configuration.
bool encoder_decoder_job(const JobSpec& spec) {
  if (spec.model.contains("encoder_layers")) return spec.model["encoder_layers"] != 0;
  if (spec.init_checkpoint.empty()) return false;
  const auto source = checkpoint_model(spec.init_checkpoint);
  return source && source->value("encoder_layers", 0) > 0;
}

}  // namespace

int run_generation_bench(const JobSpec& spec, const std::string& job_dir, EventLog& log) {
  if (encoder_decoder_job(spec)) return run_translation_bench(spec, job_dir, log);
  const torch::Device device(spec.device);
  GPT model = build_model(spec, &log);
  model->to(device);
  model->eval();
  log.write(start_event(spec, job_dir, model));
  write_status(job_dir, StatusFile{JobStatus::running, {}, "", "", {{"pid", static_cast<int64_t>(getpid())}}});
  c10::InferenceMode guard;  // no autograd bookkeeping at all (version counters, view metadata): a cheaper step
  const int64_t B = spec.bench.batch, vocab = model->config().vocab;
  auto sorted = spec.bench.seq_lens;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t L : sorted) {
    std::vector<double> per_token_ms;
    int64_t bytes = 0;
    for (int64_t rep = 0; rep < spec.bench.repeats; ++rep) {
      GenerationState st;
      auto tok = torch::randint(0, vocab, {B}, torch::TensorOptions().dtype(torch::kLong).device(device));
      for (int64_t t = 0; t < L; ++t) tok = model->step(tok, st).argmax(-1);  // reach length L (not timed)
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t t = 0; t < spec.bench.tokens; ++t) tok = model->step(tok, st).argmax(-1);
      if (device.is_cuda()) tok.cpu();  // wait for the device before reading the clock
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      per_token_ms.push_back(ms / static_cast<double>(spec.bench.tokens));
      bytes = state_bytes(st);
    }
    const double median = log_generation_metrics(log, L, per_token_ms, bytes);
    if (::isatty(STDERR_FILENO))
      fmt::print(stderr, "length {:>6}: {:.3f} ms/token (min {:.3f}, max {:.3f}), state {} bytes\n", L, median,
                 per_token_ms.front(), per_token_ms.back(), bytes);
  }
  log.write(EndEvent{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  write_status(job_dir, StatusFile{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  return kExitFinished;
}

}  // namespace fwlab
