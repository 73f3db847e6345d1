#include "worker/teacher_kl.h"

#include "models/distill.h"
#include "text/corpora/dataset.h"

namespace fwlab {

double validation_kl(GPT& student, GPT& teacher, const TokenStream& tokens, const JobSpec& spec, torch::Device device) {
  const int64_t T = spec.train.seq_len, B = spec.train.batch_size;
  const auto windows = eval_windows(static_cast<int64_t>(tokens.size()), T, spec.eval.last_half, spec.eval.max_tokens);
  torch::NoGradGuard guard;
  student->eval();
  double total = 0.0;
  int64_t scored = 0;
  for (size_t i = 0; i < windows.size(); i += static_cast<size_t>(B)) {
    const size_t n = std::min(windows.size() - i, static_cast<size_t>(B));
    std::vector<int32_t> ids(n * static_cast<size_t>(T));
    std::vector<int64_t> from(n);
    for (size_t r = 0; r < n; ++r) {
      tokens.copy(windows[i + r].start, T, ids.data() + r * static_cast<size_t>(T));
      from[r] = windows[i + r].score_from;
    }
    const auto x = torch::from_blob(ids.data(), {static_cast<int64_t>(n), T}, torch::kInt32).to(device, torch::kLong);
    const auto s = student->forward(x), t = teacher->forward(x);
    for (size_t r = 0; r < n; ++r) {  // each window's scored positions: their mean KL times their count
      const auto row = static_cast<int64_t>(r), count = T - from[r];
      total += kl_distillation(s[row].narrow(0, from[r], count), t[row].narrow(0, from[r], count), 1.0).item<double>() *
               static_cast<double>(count);
      scored += count;
    }
  }
  student->train();
  return scored > 0 ? total / static_cast<double>(scored) : 0.0;
}

}  // namespace fwlab
