// The results as web pages, the same for `fwlab site` (static files) and `fwlab serve` (live from the database):
//   index.html               the experiments the database holds, with their cells' statuses;
//   e/NAME[--PROFILE].html   one experiment at one profile: its table (each cell links to its jobs), the comparison
//                            with the paper, the divergence report, its plots, and its jobs;
//   e/NAME[--PROFILE].runs.html  its runs: every job with its settings and key metrics, sortable and filterable
//                            (served: by query parameters; static: one page per sort column and per setting value);
//   job/ID.html              one job: settings, status, evaluations, training and validation curves, events.
// Every string from an experiment file or the database is HTML-escaped; pages hold no script.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/db.h"

namespace fwlab {

struct SiteEntry {
  std::string file;  // the experiment file
  std::string name;  // its [experiment] name
  std::string description;
  std::string profile;  // a profile the database has cells of ("" for none)
};

struct SiteContext {
  std::string repo_root, fwlab_version, gnuplot = "gnuplot";
  bool live = false;  // served: pages of running work reload themselves
};

// The experiment files with each profile the database holds cells for (files it holds none of are left out).
std::vector<SiteEntry> site_entries(Db& db, const std::vector<std::string>& files);

std::string experiment_href(const SiteEntry& e);  // "e/table1--quick.html"
std::string job_href(const std::string& job_id);  // "job/<id>.html"

std::string index_page(Db& db, const std::vector<SiteEntry>& entries, const SiteContext& ctx);
// The page, and the ids of the jobs it links to (their pages go beside it).
std::string experiment_page(Db& db, const SiteEntry& e, const SiteContext& ctx,
                            std::vector<std::string>* linked_jobs = nullptr);
// What a runs page shows: sorted by one column ("" grid order), filtered to the runs whose settings have these
// values (all of them).
struct RunsQuery {
  std::string sort;
  bool descending = false;
  std::vector<std::pair<std::string, std::string>> filters;  // (setting, value)
};
// "e/table1--quick.runs.html"
std::string runs_href(const SiteEntry& e);
// The runs page at `query`. Served (ctx.live): its links carry the whole query (?sort=..&order=desc&rule=add).
// Static: its links go to the pages runs_pages writes, each sorting by one column or filtering by one setting.
// std::invalid_argument naming the column or setting when the query names one the page does not have.
std::string runs_page(Db& db, const SiteEntry& e, const SiteContext& ctx, const RunsQuery& query);
// Every static runs page of the experiment: (path under the site's folder, page).
std::vector<std::pair<std::string, std::string>> runs_pages(Db& db, const SiteEntry& e, const SiteContext& ctx);

// nullopt when the database has no such job.
std::optional<std::string> job_page(Db& db, const std::string& job_id, const SiteContext& ctx);

}  // namespace fwlab
