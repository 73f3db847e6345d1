#include "harness/sweep_log.h"

#include <fmt/format.h>

#include <cstdio>

#include "contract/job/duration_text.h"
#include "contract/job/events.h"

namespace fwlab {

namespace {

void line(const std::string& text) {
  fmt::print("fwlab: {}\n", text);
  std::fflush(stdout);  // a log file is block-buffered: without this nothing shows until the sweep ends
}

}  // namespace

std::string key_metric(Db& db, const std::string& job_id) {
  // The best validation evaluation as the worker judges it (lowest loss); accuracy where the task has one.
  auto q = db.prepare(
      "SELECT step, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? AND split = 'valid' AND loss IS NOT NULL "
      "ORDER BY loss, step LIMIT 1");
  q.bind(1, job_id);
  if (!q.step()) return "";
  const auto step = q.integer(0);
  if (!q.is_null(4)) return fmt::format("valid accuracy {:.4f} (best, step {})", q.real(4), step);
  if (!q.is_null(3)) return fmt::format("valid bpc {:.4f} (best, step {})", q.real(3), step);
  if (!q.is_null(2)) return fmt::format("valid ppl {:.2f} (best, step {})", q.real(2), step);
  return fmt::format("valid loss {:.4f} (best, step {})", q.real(1), step);
}

void log_job_started(const PlannedJob& j) {
  line(fmt::format("started {} {} [{}]", j.stage, coords_label(j.coords), j.id));
}

std::optional<int64_t> resumed_from_step(Db& db, const std::string& job_id) {
  auto q = db.prepare(
      "SELECT json_extract(body, '$.resumed_from_step') FROM events WHERE job_id = ? AND type = 'start' "
      "ORDER BY seq DESC LIMIT 1");
  q.bind(1, job_id);
  if (!q.step() || q.is_null(0)) return std::nullopt;
  return q.integer(0);
}

void log_job_ended(Db& db, const PlannedJob& j, const std::string& status) {
  auto q = db.prepare("SELECT started, finished FROM jobs WHERE id = ?");
  q.bind(1, j.id);
  std::string took;
  if (q.step() && !q.is_null(0) && !q.is_null(1)) took = " in " + short_duration(q.real(1) - q.real(0));
  const auto metric = key_metric(db, j.id);
  const auto resumed = resumed_from_step(db, j.id);
  line(fmt::format("{} {} {} [{}]{}{}{}", status, j.stage, coords_label(j.coords), j.id,
                   metric.empty() ? "" : ": " + metric, took,
                   resumed ? fmt::format(" (resumed from step {})", *resumed) : ""));
}

SweepTicker::SweepTicker(double every_s) : every_s_(every_s), start_(unix_time()), last_(unix_time()) {}

void SweepTicker::tick(size_t ended, size_t total, int running, int unsuccessful, bool force) {
  const double now = unix_time();
  if (ended_at_start_ == static_cast<size_t>(-1)) ended_at_start_ = ended;
  if (total == 0 || (!force && now - last_ < every_s_)) return;  // nothing to run: the summary line says it
  last_ = now;
  const size_t done_here = ended - ended_at_start_;
  // The pace of the jobs this sweep saw end; none yet: unknown.
  const std::string eta = ended >= total   ? "done"
                          : done_here == 0 ? "ETA unknown"
                                           : "ETA ~" + short_duration((now - start_) / static_cast<double>(done_here) *
                                                                      static_cast<double>(total - ended));
  line(fmt::format("{}/{} jobs ended, {} running, {} unsuccessful, {} elapsed, {}", ended, total, running, unsuccessful,
                   short_duration(now - start_), eta));
}

}  // namespace fwlab
