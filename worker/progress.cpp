#include "worker/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "contract/job/duration_text.h"

namespace fwlab {

Progress::Progress(int64_t total, int64_t first_step, bool tty)
    : total_(total), first_step_(first_step), tty_(tty), start_(clock::now()) {}

double Progress::elapsed() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

// From this process's own pace: a resumed job's earlier steps took place in another process.
double Progress::eta(int64_t step) const {
  const double per_step = elapsed() / static_cast<double>(std::max<int64_t>(1, step + 1 - first_step_));
  return per_step * static_cast<double>(total_ - step - 1);
}

void Progress::step(int64_t step, double loss, double tokens_per_s) {
  if (!tty_) return;
  fmt::print(stderr, "\rstep {}/{}  loss {:.4f}  {:.0f} tok/s  ETA {}   ", step + 1, total_, loss, tokens_per_s,
             short_duration(eta(step)));
  if (step + 1 == total_) fmt::print(stderr, "\n");
}

void Progress::interval(int64_t step, double loss, double lr, double tokens_per_s) {
  if (tty_) return;
  fmt::print("step {}/{}  loss {:.4f}  lr {:.3g}  {:.0f} tok/s  elapsed {}  ETA {}\n", step + 1, total_, loss, lr,
             tokens_per_s, short_duration(elapsed()), short_duration(eta(step)));
  std::fflush(stdout);  // a log file is block-buffered: without this the line appears when the job ends
}

}  // namespace fwlab
