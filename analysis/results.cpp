#include "analysis/results.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>

#include "contract/job/job_status.h"

namespace fwlab {

bool JobRecord::failed() const {
  // Ended without a result: a table cell that says why rather than a number.
  const auto& s = status;
  return s && (*s == JobStatus::failed || *s == JobStatus::crashed || *s == JobStatus::timeout ||
               *s == JobStatus::blocked || *s == JobStatus::cancelled);
}

std::string JobRecord::status_text() const {
  if (status) return std::string(to_string(*status));
  return planned.applicable ? "not run" : "n/a";
}

namespace {

std::optional<double> opt_real(Statement& q, int c) {
  if (q.is_null(c)) return std::nullopt;
  return q.real(c);
}

// Every job's kernel_fallback events, in record order.
void read_kernel_fallbacks(Db& db, const std::map<std::string, size_t>& by_id, std::vector<JobRecord>& jobs) {
  auto q = db.prepare("SELECT body FROM events WHERE job_id = ? AND type = 'kernel_fallback' ORDER BY seq");
  for (const auto& [id, index] : by_id) {
    q.bind(1, id);
    while (q.step()) {
      auto body = nlohmann::json::parse(q.text(0), nullptr, false);
      if (body.is_object()) jobs[index].kernel_fallbacks.push_back(std::move(body));
    }
    q.reset();
  }
}

}  // namespace

ResultSet::ResultSet(const Experiment& ex, const std::string& profile, Db& db, const std::string& repo_root,
                     const std::string& version, const JobResults* planned_with)
    : ex_(ex), profile_(profile), db_(db) {
  std::map<std::string, size_t> by_id;
  // Cells whose derived settings read results are planned with what the database holds (harness/derive.h).
  const auto results = job_results_in(db);
  for (auto& p : plan_experiment(ex, repo_root, version, planned_with ? planned_with : results.get(), false).jobs) {
    JobRecord r;
    r.planned = std::move(p);
    if (r.planned.applicable) by_id[r.planned.id] = jobs_.size();
    jobs_.push_back(std::move(r));
  }
  auto jq = db.prepare("SELECT status, cause, reason FROM jobs WHERE id = ?");
  auto eq = db.prepare(
      "SELECT split, step, checkpoint, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? ORDER BY split, step, "
      "checkpoint");
  auto dq = db.prepare(
      "SELECT step, cause, value, last_finite_loss, lr, first_nonfinite_layer, state_layer FROM divergences WHERE "
      "job_id = ?");
  for (const auto& [id, index] : by_id) {
    auto& r = jobs_[index];
    jq.bind(1, id);
    if (jq.step()) {
      r.status = parse_job_status(jq.text(0));
      r.cause = jq.is_null(1) ? "" : jq.text(1);
      r.reason = jq.is_null(2) ? "" : jq.text(2);
    }
    jq.reset();
    eq.bind(1, id);
    while (eq.step())
      r.evals.push_back(
          {eq.text(0), eq.text(2), eq.integer(1), opt_real(eq, 3), opt_real(eq, 4), opt_real(eq, 5), opt_real(eq, 6)});
    eq.reset();
    dq.bind(1, id);
    if (dq.step()) {
      DivergenceRow d;
      d.step = dq.integer(0);
      d.cause = dq.is_null(1) ? "" : dq.text(1);
      d.value = dq.is_null(2) ? "" : dq.text(2);
      d.last_finite_loss = opt_real(dq, 3);
      d.lr = opt_real(dq, 4);
      d.first_nonfinite_layer = dq.is_null(5) ? "" : dq.text(5);
      d.state_layer = dq.is_null(6) ? "" : dq.text(6);
      r.divergence = d;
    }
    dq.reset();
  }
  read_kernel_fallbacks(db, by_id, jobs_);
  // Two cells whose settings came out the same (a derived setting) are one job: each shows its record.
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const auto it = by_id.find(jobs_[i].planned.id);
    if (!jobs_[i].planned.applicable || it == by_id.end() || it->second == i) continue;
    const auto& same = jobs_[it->second];
    auto& r = jobs_[i];
    r.status = same.status, r.cause = same.cause, r.reason = same.reason, r.evals = same.evals;
    r.divergence = same.divergence, r.kernel_fallbacks = same.kernel_fallbacks;
  }
}

void ResultSet::assume_all_finished() {
  for (auto& j : jobs_)
    if (j.planned.applicable && !j.status) j.status = JobStatus::finished;
}

const std::map<int64_t, double>& ResultSet::series(const std::string& job_id, const std::string& key) const {
  auto k = std::make_pair(job_id, key);
  auto it = series_.find(k);
  if (it != series_.end()) return it->second;
  auto& out = series_[k];
  auto q = db_.prepare("SELECT step, value FROM metrics WHERE job_id = ? AND key = ? ORDER BY step");
  q.bind(1, job_id).bind(2, key);
  while (q.step()) out[q.integer(0)] = q.is_null(1) ? std::numeric_limits<double>::quiet_NaN() : q.real(1);
  return out;
}

nlohmann::json job_value(const JobRecord& job, const std::string& name) {
  if (name == "stage") return job.stage();
  if (job.planned.coords.contains(name)) return job.planned.coords.at(name);
  const auto& aliases = key_aliases();
  const std::string path = aliases.count(name) ? aliases.at(name) : name;
  const nlohmann::json* node = &job.planned.spec;
  size_t start = 0;
  while (node) {
    const auto dot = path.find('.', start);
    const auto part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &node->at(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return node ? *node : nlohmann::json();
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';  // one line: a newline would end the row
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15)
      return fmt::format("{}", static_cast<int64_t>(d));
    return fmt::format("{}", d);
  }
  return v.dump();
}

}  // namespace fwlab
