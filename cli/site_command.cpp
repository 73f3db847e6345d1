// `fwlab site --out DIR`: the results pages as static files (analysis/site.h), to copy off a cluster and open.
// `fwlab serve`: the same pages live from the database over HTTP, read-only, on 127.0.0.1 unless told otherwise.
#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "analysis/html.h"
#include "analysis/site.h"
#include "harness/experiment.h"
#include "cli/commands.h"
#include "contract/job/events.h"
#include "contract/version.h"

namespace fwlab::cli {

namespace fs = std::filesystem;

namespace {

// Where a sweep's recorded file is now: as recorded (absolute since sweeps record it so), else relative to this
// directory or to the source tree (older databases kept the path as typed).
std::optional<std::string> recorded_file(const std::string& path) {
  std::error_code ec;
  for (const auto& p : {fs::path(path), fs::path(FWLAB_SOURCE_DIR) / path})
    if (fs::is_regular_file(p, ec)) return p.string();
  return std::nullopt;
}

// The files given; else each experiment the database holds a sweep of, from the file its latest sweep read, and
// the catalog (experiments/*.toml of the source tree) for the rest. Experiments whose file is gone go to `missing`.
std::vector<std::string> experiment_files(Db& db, const std::vector<std::string>& given,
                                          std::vector<std::string>& missing) {
  if (!given.empty()) return given;
  std::map<std::string, std::string> by_name;
  for (const auto& entry : fs::directory_iterator(fs::path(FWLAB_SOURCE_DIR) / "experiments"))
    if (entry.path().extension() == ".toml") by_name[load_experiment(entry.path().string(), "").name] = entry.path();
  auto q = db.prepare(
      "SELECT experiment, file FROM sweeps s WHERE id = (SELECT MAX(id) FROM sweeps WHERE experiment = s.experiment) "
      "ORDER BY experiment");
  while (q.step()) {
    if (const auto file = recorded_file(q.text(1)))
      by_name[q.text(0)] = *file;
    else if (!by_name.count(q.text(0)))
      missing.push_back(fmt::format("experiment '{}': its file {} is not there any more", q.text(0), q.text(1)));
  }
  std::vector<std::string> files;
  for (const auto& [name, file] : by_name) files.push_back(file);
  return files;
}

SiteContext context(const SiteOptions& o, bool live) { return {FWLAB_SOURCE_DIR, kFwlabVersion, o.gnuplot, live}; }

// A runs page's query from the address: sort=COLUMN, order=asc|desc, and SETTING=VALUE filters.
RunsQuery runs_query(const httplib::Request& req) {
  RunsQuery q;
  for (const auto& [key, value] : req.params) {
    if (key == "sort")
      q.sort = value;
    else if (key == "order" && (value == "asc" || value == "desc"))
      q.descending = value == "desc";
    else if (key == "order")
      throw std::invalid_argument(fmt::format("order={} is neither asc nor desc", value));
    else
      q.filters.emplace_back(key, value);
  }
  return q;
}

// The entry whose page is at `href`.
std::optional<SiteEntry> entry_at(const std::vector<SiteEntry>& entries, std::string (*href_of)(const SiteEntry&),
                                  const std::string& href) {
  for (const auto& e : entries)
    if (href_of(e) == href) return e;
  return std::nullopt;
}

void write_page(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  write_file_atomic(path.string(), text);
}

}  // namespace

int cmd_site(const SiteOptions& o, const Common& c) {
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  if (o.out.empty()) throw ArgumentError("site: --out DIR is required (the folder the pages go to)");
  Db db(c.db_path, true);
  std::vector<std::string> missing;
  const auto entries = site_entries(db, experiment_files(db, o.files, missing));
  const auto ctx = context(o, false);
  const fs::path out(o.out);
  write_page(out / "index.html", index_page(db, entries, ctx));
  std::set<std::string> jobs;
  for (const auto& e : entries) {
    std::vector<std::string> linked;
    write_page(out / experiment_href(e), experiment_page(db, e, ctx, &linked));
    for (const auto& [path, page] : runs_pages(db, e, ctx)) write_page(out / path, page);
    jobs.insert(linked.begin(), linked.end());
  }
  for (const auto& id : jobs)
    if (const auto page = job_page(db, id, ctx)) write_page(out / job_href(id), *page);
  fmt::print("{}: {} experiment page(s), {} job page(s); open {}\n", o.out, entries.size(), jobs.size(),
             (out / "index.html").string());
  for (const auto& m : missing)
    fmt::print(stderr, "fwlab: site: {}: no page for it (name the file: fwlab site FILE... --db {})\n", m, c.db_path);
  return missing.empty() ? 0 : 1;
}

int cmd_serve(const SiteOptions& o, const Common& c) {
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  std::vector<std::string> missing;
  const auto files = [&] {
    Db db(c.db_path, true);
    return experiment_files(db, o.files, missing);
  }();
  for (const auto& m : missing) fmt::print(stderr, "fwlab: serve: {}: no page for it\n", m);
  const auto ctx = context(o, true);
  httplib::Server server;
  auto reply = [](httplib::Response& res, const std::optional<std::string>& page) {
    res.set_header("Content-Security-Policy", html::kContentPolicy);
    if (!page) {
      res.status = 404;
      res.set_content(html::page("not found", "<h1>not found</h1><p><a href=\"/index.html\">all experiments</a></p>"),
                      "text/html; charset=utf-8");
      return;
    }
    res.set_content(*page, "text/html; charset=utf-8");
  };
  // Each request reads the database afresh (read-only), so a running sweep's pages move on.
  server.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/index.html"); });
  server.Get("/index.html", [&](const httplib::Request&, httplib::Response& res) {
    Db db(c.db_path, true);
    reply(res, index_page(db, site_entries(db, files), ctx));
  });
  // Before the experiment pages' route, which would take "NAME.runs" for an experiment's name.
  server.Get(R"(/e/([A-Za-z0-9_.-]+)\.runs\.html)", [&](const httplib::Request& req, httplib::Response& res) {
    Db db(c.db_path, true);
    const auto e = entry_at(site_entries(db, files), runs_href, "e/" + std::string(req.matches[1]) + ".runs.html");
    if (!e) return reply(res, std::nullopt);
    try {
      reply(res, runs_page(db, *e, ctx, runs_query(req)));
    } catch (const std::invalid_argument& err) {  // a column or setting the page does not have: 400, named
      reply(res, html::page("bad query", fmt::format("<h1>bad query</h1><p>{}</p>", html::esc(err.what()))));
      res.status = 400;
    }
  });
  server.Get(R"(/e/([A-Za-z0-9_.-]+)\.html)", [&](const httplib::Request& req, httplib::Response& res) {
    Db db(c.db_path, true);
    const auto e = entry_at(site_entries(db, files), experiment_href, "e/" + std::string(req.matches[1]) + ".html");
    reply(res, e ? std::optional<std::string>(experiment_page(db, *e, ctx)) : std::nullopt);
  });
  server.Get(R"(/job/([A-Za-z0-9_.-]+)\.html)", [&](const httplib::Request& req, httplib::Response& res) {
    Db db(c.db_path, true);
    reply(res, job_page(db, req.matches[1], ctx));
  });
  const int port = o.port == 0 ? server.bind_to_any_port(o.bind) : (server.bind_to_port(o.bind, o.port) ? o.port : -1);
  if (port < 0)
    throw ArgumentError(
        fmt::format("serve: cannot listen on {}:{} (in use, or not an address of this machine)", o.bind, o.port));
  fmt::print("fwlab: serving {} read-only at http://{}:{}/ (Ctrl-C stops)\n", c.db_path, o.bind, port);
  std::fflush(stdout);
  return server.listen_after_bind() ? 0 : 1;
}

}  // namespace fwlab::cli
