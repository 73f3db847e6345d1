// What a training job prints while it runs: on a terminal, one line redrawn every step; anywhere else (a log
// file under the local pool, nohup or Slurm), one line per log interval, so that a log shows how far a job is.
// The event record is written elsewhere and does not depend on either.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fwlab {

class Progress {
 public:
  // `total`: the job's last step; `first_step`: where this process started (a resumed job starts past 0).
  Progress(int64_t total, int64_t first_step, bool tty);
  // After step `step` (0-based): the terminal's redraw.
  void step(int64_t step, double loss, double tokens_per_s);
  // At the end of a log interval: the line a log file keeps. `loss` is the interval's mean.
  void interval(int64_t step, double loss, double lr, double tokens_per_s);

 private:
  double elapsed() const;
  double eta(int64_t step) const;
  using clock = std::chrono::steady_clock;
  int64_t total_, first_step_;
  bool tty_;
  clock::time_point start_;
};

}  // namespace fwlab
