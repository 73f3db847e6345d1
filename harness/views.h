// The results database's views: what a person asks of it without knowing its tables (harness/README.md).
//   runs:   one row per job: its experiments and profiles, stage, cell, status, parameter count, the best and
//           final validation results, the test results, the final training loss, ISO times, the job folder,
//           its config (JSON), and the step its last attempt resumed from (NULL: it started afresh);
//   params: one row per (job, setting), MLflow's shape: every leaf of the job's config under its dotted key;
//   best:   the finished runs of each experiment, profile and stage ranked by best validation loss (rank 1 the
//           best), so that "the best cell" never picks a diverged or unfinished run.
#pragma once

#include "harness/db.h"

namespace fwlab {

// A writable database gets the views (replaced, so that an older definition never lingers); a read-only one
// made by an older fwlab gets them as temporary views of this connection.
void create_views(Db& db, bool read_only);

}  // namespace fwlab
