// One job's page (analysis/site.h): settings, status, evaluations, curves and events.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "analysis/html.h"
#include "analysis/site.h"
#include "contract/job/duration_text.h"
#include "harness/plan.h"

namespace fwlab {

using html::esc;

namespace {

std::string text_of(Statement& q, int c) {
  return q.is_null(c) ? "" : q.value(c).is_string() ? q.text(c) : q.value(c).dump();
}

// Two columns of (name, value) rows, each escaped.
std::string pairs_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "<table>\n";
  for (const auto& [k, v] : rows)
    out += fmt::format("<tr><th class=\"label\">{}</th><td class=\"label\">{}</td></tr>\n", esc(k), esc(v));
  return out + "</table>\n";
}

std::string settings_html(Db& db, const std::string& id) {
  auto q = db.prepare("SELECT key, value FROM params WHERE job_id = ? ORDER BY key");
  q.bind(1, id);
  std::vector<std::pair<std::string, std::string>> rows;
  while (q.step()) rows.emplace_back(q.text(0), text_of(q, 1));
  return pairs_table(rows);
}

std::string evals_html(Db& db, const std::string& id, html::Series& valid) {
  auto q = db.prepare(
      "SELECT split, step, checkpoint, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? ORDER BY split DESC, step");
  q.bind(1, id);
  std::string out =
      "<table>\n<tr><th class=\"label\">split</th><th>step</th><th "
      "class=\"label\">checkpoint</th><th>loss</th><th>ppl</th>"
      "<th>bpc</th><th>accuracy</th></tr>\n";
  while (q.step()) {
    if (q.text(0) == "valid" && !q.is_null(3)) valid.points.emplace_back(static_cast<double>(q.integer(1)), q.real(3));
    out += fmt::format(
        "<tr><td class=\"label\">{}</td><td>{}</td><td "
        "class=\"label\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        esc(q.text(0)), q.integer(1), esc(q.text(2)), esc(text_of(q, 3)), esc(text_of(q, 4)), esc(text_of(q, 5)),
        esc(text_of(q, 6)));
  }
  return out + "</table>\n";
}

// The loss chart (training and validation together), then one chart per other metric.
std::string curves_html(Db& db, const std::string& id, const html::Series& valid) {
  auto q = db.prepare("SELECT key, step, value FROM metrics WHERE job_id = ? ORDER BY key, step");
  q.bind(1, id);
  std::map<std::string, html::Series> by_key;
  while (q.step()) {
    auto& s = by_key[q.text(0)];
    s.name = q.text(0);
    if (!q.is_null(2)) s.points.emplace_back(static_cast<double>(q.integer(1)), q.real(2));
  }
  std::vector<html::Series> loss;
  if (by_key.count("train_loss")) loss.push_back(by_key.at("train_loss"));
  if (!valid.points.empty()) loss.push_back(valid);
  std::string out = loss.empty() ? "" : html::line_chart("loss", loss, true);
  for (const auto& [key, s] : by_key)
    if (key != "train_loss") out += html::line_chart(key, {s});
  return out.empty() ? "<p>no curves recorded</p>\n" : out;
}

std::string events_html(Db& db, const std::string& id) {
  auto q = db.prepare(
      "SELECT seq, type, strftime('%Y-%m-%dT%H:%M:%SZ', time, 'unixepoch'), body FROM events WHERE job_id = ? ORDER BY "
      "seq LIMIT 500");
  q.bind(1, id);
  std::string out =
      "<table>\n<tr><th>seq</th><th class=\"label\">type</th><th class=\"label\">time</th><th "
      "class=\"label\">record</th></tr>\n";
  while (q.step())
    out += fmt::format(
        "<tr><td>{}</td><td class=\"label\">{}</td><td class=\"label\">{}</td><td "
        "class=\"label\"><code>{}</code></td></tr>\n",
        q.integer(0), esc(q.text(1)), esc(q.text(2)), esc(q.text(3)));
  return out + "</table>\n";
}

std::string one_derivation_html(const std::string& key, const std::string& value, const std::string& record_text,
                                const std::string& coords);

// Why the job has a derived setting (harness/derive.h): the value, its selector and the ranking it read, each
// input linked to its page. "" where the job has none (or the database predates derivations).
std::string derivation_html(Db& db, const std::string& id) {
  auto has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'derivations'");
  if (!has.step()) return "";
  auto q = db.prepare("SELECT key, value, record, coords FROM derivations WHERE job_id = ? ORDER BY stage, coords");
  q.bind(1, id);
  std::string out;
  while (q.step()) out += one_derivation_html(q.text(0), q.text(1), q.text(2), q.text(3));
  return out;
}

// One cell's derivation: the value, the selector, and the ranking it read.
std::string one_derivation_html(const std::string& key, const std::string& value, const std::string& record_text,
                                const std::string& coords) {
  const auto record = nlohmann::json::parse(record_text, nullptr, false);
  const auto cell = nlohmann::json::parse(coords, nullptr, false);
  std::string out =
      fmt::format("<h2>Derived setting ({})</h2>\n<p><code>{}</code> = <code>{}</code>, chosen by <b>{}</b>",
                  esc(cell.is_object() ? coords_label(cell) : coords), esc(key), esc(value),
                  esc(record.value("selector", std::string("?"))));
  if (record.contains("ranking")) {
    out += fmt::format(
        " from the inputs below, ranked by {} ({}).</p>\n<table>\n<tr><th>rank</th><th "
        "class=\"label\">job</th><th class=\"label\">layers</th><th>score</th></tr>\n",
        esc(record.value("metric", std::string())), esc(record.value("order", std::string())));
    int rank = 0;
    for (const auto& r : record["ranking"]) {
      const auto job = r.value("job", std::string());
      const auto link = job == "mean" ? std::string("mean of the jobs")
                                      : fmt::format("<a href=\"{}.html\">{}</a>", esc(job), esc(job));
      out += fmt::format("<tr><td>{}</td><td class=\"label\">{}</td><td class=\"label\">{}</td><td>{:.6g}</td></tr>\n",
                         ++rank, link, esc(r["layers"].dump()), r.value("score", 0.0));
    }
    return out + "</table>\n";
  }
  return out + fmt::format(" ({} of {} layers, from their number alone).</p>\n", record.value("count", 0),
                           record.value("n_layers", 0));
}

}  // namespace

std::optional<std::string> job_page(Db& db, const std::string& job_id, const SiteContext& ctx) {
  auto q = db.prepare(
      "SELECT job_id, experiments, stage, coords, status, cause, reason, n_params, host, started, finished, seconds, "
      "dir "
      "FROM runs WHERE job_id = ?");
  q.bind(1, job_id);
  if (!q.step()) return std::nullopt;
  const auto status = q.text(4);
  const auto coords = nlohmann::json::parse(q.text(3).empty() ? "{}" : q.text(3), nullptr, false);
  const std::vector<std::pair<std::string, std::string>> summary = {
      {"experiments", q.text(1)},
      {"stage", q.text(2)},
      {"cell", coords.is_object() ? coords_label(coords) : q.text(3)},
      {"status", status},
      {"cause", q.text(5)},
      {"reason", q.text(6)},
      {"parameters", text_of(q, 7)},
      {"host", q.text(8)},
      {"started", q.text(9)},
      {"finished", q.text(10)},
      {"took", q.is_null(11) ? std::string("–") : short_duration(q.real(11))},
      {"folder", q.text(12)}};
  html::Series valid{"valid loss", {}, std::nullopt};
  std::string body = fmt::format("<nav><a href=\"../index.html\">all experiments</a></nav>\n<h1>job {}</h1>\n{}",
                                 esc(job_id), pairs_table(summary));
  const auto evals = evals_html(db, job_id, valid);
  body += "<h2>Curves</h2>\n" + curves_html(db, job_id, valid);
  body += "<h2>Evaluations</h2>\n" + evals;
  body += derivation_html(db, job_id);
  body += "<h2>Settings</h2>\n" + settings_html(db, job_id);
  body += "<h2>Events</h2>\n" + events_html(db, job_id);
  const bool running = status == "running" || status == "pending" || status == "submitted";
  return html::page("job " + job_id, body, ctx.live && running ? 10 : 0);
}

}  // namespace fwlab
