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

namespace {

// An evaluation in the measure the tables show: accuracy for tasks, perplexity for text (also for byte-level
// corpora, whose bits per byte the worker records beside it), else the loss.
std::string eval_text(Statement& q, const char* split) {
  if (!q.is_null(4)) return fmt::format("{} accuracy {:.4f}", split, q.real(4));
  if (!q.is_null(2)) return fmt::format("{} ppl {:.2f}", split, q.real(2));
  if (!q.is_null(3)) return fmt::format("{} bpc {:.4f}", split, q.real(3));
  return fmt::format("{} loss {:.4f}", split, q.real(1));
}

}  // namespace

std::string key_metric(Db& db, const std::string& job_id) {
  // The best validation evaluation as the worker judges it (lowest loss), then the test of that checkpoint.
  auto q = db.prepare(
      "SELECT step, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? AND split = 'valid' AND loss IS NOT NULL "
      "ORDER BY loss, step LIMIT 1");
  q.bind(1, job_id);
  if (!q.step()) return "";
  auto out = fmt::format("{} (best, step {})", eval_text(q, "valid"), q.integer(0));
  auto t = db.prepare(
      "SELECT step, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? AND split = 'test' AND loss IS NOT NULL "
      "ORDER BY checkpoint = 'best' DESC, step DESC LIMIT 1");
  t.bind(1, job_id);
  if (t.step()) out += ", " + eval_text(t, "test");
  return out;
}

void log_job_started(const PlannedJob& j) {
  line(fmt::format("started {} {} [{}]", j.stage, coords_label(j.coords), j.id));
}

std::string divergence_text(Db& db, const std::string& job_id) {
  auto q = db.prepare(
      "SELECT step, cause, value, last_finite_loss, lr, first_nonfinite_layer, state_layer FROM divergences "
      "WHERE job_id = ?");
  q.bind(1, job_id);
  if (!q.step()) return "";
  std::string out = fmt::format("{} at step {} (value {}", q.text(1), q.integer(0), q.text(2));
  if (!q.is_null(3)) out += fmt::format("; last finite loss {:.4g}", q.real(3));
  if (!q.is_null(4)) out += fmt::format("; lr {:.3g}", q.real(4));
  if (!q.is_null(5)) out += fmt::format("; first non-finite output: {}", q.text(5));
  if (!q.is_null(6)) out += fmt::format("; state over the limit in {}", q.text(6));
  return out + ")";
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
