// A finished record found in a job's directory that the database has not seen: the database was lost or rebuilt,
// or the records were copied from another machine or an earlier session. The append-only record is the result and
// the database is derived from it, so such a job is ingested as it stands instead of being run again.
#pragma once

#include <string>

#include "harness/store.h"

namespace fwlab {

// Ingests JOB_DIR's record and gives job `id` the outcome its status file records, with the record's own start and
// end times, when that status is a result that stands (finished; diverged unless `retry_diverged`) and, where
// another job will start from this one (`needs_checkpoint`: one without a result of its own) and it finished, its
// best.safetensors is there. False: nothing
// done.
bool adopt_record(Store& store, const std::string& id, const std::string& job_dir, bool needs_checkpoint,
                  bool retry_diverged);

}  // namespace fwlab
