// The site's index and its addresses (analysis/site.h).
#include <fmt/format.h>

#include <map>

#include "analysis/html.h"
#include "analysis/site.h"
#include "harness/experiment.h"

namespace fwlab {

namespace {

// A profile name is a TOML key and may hold anything: the address keeps letters, digits, '_', '-' and '.'.
std::string address_safe(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  return out;
}

}  // namespace

std::vector<SiteEntry> site_entries(Db& db, const std::vector<std::string>& files) {
  std::vector<SiteEntry> out;
  auto q = db.prepare("SELECT DISTINCT profile FROM cells WHERE experiment = ? ORDER BY profile");
  for (const auto& file : files) {
    const auto ex = load_experiment(file, "");
    q.reset();
    q.bind(1, ex.name);
    while (q.step()) out.push_back({file, ex.name, ex.description, q.text(0)});
  }
  return out;
}

std::string experiment_href(const SiteEntry& e) {
  return "e/" + e.name + (e.profile.empty() ? "" : "--" + address_safe(e.profile)) + ".html";
}

std::string job_href(const std::string& job_id) { return "job/" + address_safe(job_id) + ".html"; }

std::string index_page(Db& db, const std::vector<SiteEntry>& entries, const SiteContext& ctx) {
  auto q = db.prepare(
      "SELECT COALESCE(j.status, 'n/a'), COUNT(*) FROM cells c LEFT JOIN jobs j ON j.id = c.job_id "
      "WHERE c.experiment = ? AND c.profile = ? GROUP BY 1 ORDER BY 1");
  std::string rows;
  bool running = false;
  for (const auto& e : entries) {
    q.reset();
    q.bind(1, e.name).bind(2, e.profile);
    std::string counts;
    while (q.step()) {
      const auto status = q.text(0);
      running = running || status == "running" || status == "pending" || status == "submitted";
      counts += fmt::format("{}<span class=\"status-{}\">{} {}</span>", counts.empty() ? "" : ", ", html::esc(status),
                            q.integer(1), html::esc(status));
    }
    rows += fmt::format(
        "<tr><td class=\"label\"><a href=\"{}\">{}</a></td><td class=\"label\">{}</td><td class=\"label\">{}</td>"
        "<td class=\"label\">{}</td></tr>\n",
        html::esc(experiment_href(e)), html::esc(e.name), html::esc(e.profile.empty() ? "(none)" : e.profile),
        html::esc(e.description), counts);
  }
  const auto body = fmt::format(
      "<h1>fwlab results</h1>\n<p>{} experiment page(s) from the results database{}.</p>\n"
      "<table>\n<tr><th class=\"label\">experiment</th><th class=\"label\">profile</th><th "
      "class=\"label\">description</th>"
      "<th class=\"label\">cells</th></tr>\n{}</table>\n",
      entries.size(), ctx.live ? " (live: pages of running work reload every 10 s)" : "", rows);
  return html::page("fwlab results", body, ctx.live && running ? 10 : 0);
}

}  // namespace fwlab
