// The generation benchmark of an encoder-decoder (T2R Figs. 2-3): at each length L, a batch of random sources of
// L tokens is encoded and L output tokens are decoded greedily, every token fed back whatever it is (the output
// has exactly L tokens, as the figures' "input and output of the same length"). Recorded as the decoder-only
// benchmark records (worker/generation_bench.cpp), so that the same tables and plots read it: gen_ms_per_token
// (decoding time / L, median over repeats; encoding not included), gen_state_bytes (the attention memory at the
// end: the self mixers' caches or states plus the cross memory, for the whole batch).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "models/seq2seq/seq2seq_io.h"
#include "worker/generation_metrics.h"
#include "worker/trainer.h"
#include "worker/translate_job.h"

namespace fwlab {

namespace {

// One decode of L tokens after encoding `src`: milliseconds per token and the attention memory at the end.
std::pair<double, int64_t> decode_once(Seq2Seq& model, const torch::Tensor& src, int64_t L) {
  auto state = model->start(src);
  auto tok = torch::full({src.size(0)}, 2, src.options());  // BOS (worker/parallel_data.h)
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < L; ++t) tok = model->step(tok, state).argmax(-1);
  if (src.is_cuda()) tok.cpu();  // wait for the device before reading the clock
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return {ms / static_cast<double>(L), state.bytes()};
}

}  // namespace

int run_translation_bench(const JobSpec& spec, const std::string& job_dir, EventLog& log) {
  const torch::Device device(spec.device);
  auto model = build_seq2seq(spec, log);
  model->to(device);
  model->eval();
  log.write(start_event(spec, job_dir, model->config(), count_parameters(model->config()),
                        model->embed->weight.scalar_type()));
  write_status(job_dir, StatusFile{JobStatus::running, {}, "", "", {{"pid", static_cast<int64_t>(getpid())}}});
  torch::NoGradGuard guard;
  auto sorted = spec.bench.seq_lens;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t L : sorted) {
    // Ids from 4 on: not pad, unk, bos or eos.
    auto src = torch::randint(4, model->config().vocab, {spec.bench.batch, L},
                              torch::TensorOptions().dtype(torch::kLong).device(device));
    std::vector<double> per_token_ms;
    int64_t bytes = 0;
    for (int64_t rep = 0; rep < spec.bench.repeats; ++rep) {
      const auto [ms, b] = decode_once(model, src, L);
      per_token_ms.push_back(ms), bytes = b;
    }
    const double median = log_generation_metrics(log, L, per_token_ms, bytes);
    fmt::print(stderr, "length {:>6}: {:.3f} ms/token ({:.0f} tokens/s at batch {}), attention memory {} bytes\n", L,
               median, 1000.0 * static_cast<double>(spec.bench.batch) / median, spec.bench.batch, bytes);
  }
  log.write(EndEvent{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  write_status(job_dir, StatusFile{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  return kExitFinished;
}

}  // namespace fwlab
