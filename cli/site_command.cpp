// `fwlab site --out DIR`: the results pages as static files (analysis/site.h), to copy off a cluster and open.
// `fwlab serve`: the same pages live from the database over HTTP, read-only, on 127.0.0.1 unless told otherwise.
#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "analysis/html.h"
#include "analysis/site.h"
#include "cli/commands.h"
#include "contract/job/events.h"
#include "contract/version.h"

namespace fwlab::cli {

namespace fs = std::filesystem;

namespace {

// The files given, else the catalog: experiments/*.toml of the source tree, sorted.
std::vector<std::string> experiment_files(const std::vector<std::string>& given) {
  if (!given.empty()) return given;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(fs::path(FWLAB_SOURCE_DIR) / "experiments"))
    if (entry.path().extension() == ".toml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
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
  const auto entries = site_entries(db, experiment_files(o.files));
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
  return 0;
}

int cmd_serve(const SiteOptions& o, const Common& c) {
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  const auto files = experiment_files(o.files);
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
