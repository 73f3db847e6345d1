// The results as web pages, the same for `fwlab site` (static files) and `fwlab serve` (live from the database):
//   index.html               the experiments the database holds, with their cells' statuses;
//   e/NAME[--PROFILE].html   one experiment at one profile: its table (each cell links to its jobs), the comparison
//                            with the paper, the divergence report, its plots, and its jobs;
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
// nullopt when the database has no such job.
std::optional<std::string> job_page(Db& db, const std::string& job_id, const SiteContext& ctx);

}  // namespace fwlab
