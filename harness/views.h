// The results database's views: what a person asks of it without knowing its tables (harness/README.md).
//   runs:   one row per job: its experiments and profiles, stage, cell, status, parameter count, the best and
//           final validation results, the test results, the final training loss, ISO times, the job folder,
//           and its config (JSON);
//   params: one row per (job, setting), MLflow's shape: every leaf of the job's config under its dotted key.
#pragma once

#include "harness/db.h"

namespace fwlab {

// A writable database gets the views (replaced, so that an older definition never lingers); a read-only one
// made by an older fwlab gets them as temporary views of this connection.
void create_views(Db& db, bool read_only);

}  // namespace fwlab
