// Incremental, idempotent ingestion of a job's record (events.jsonl, status.json) into the results database.
#pragma once

#include <string>

#include "harness/db.h"

namespace fwlab {

// Adds the complete event lines past the job's stored offset, in one transaction together with the new offset:
// ingesting twice, or again after a crash half-way, adds nothing twice. Returns the number of events added.
int64_t ingest_events(Db& db, const std::string& job_id, const std::string& job_dir);

// Forgets a job's ingested record (before a retry starts it over in a fresh directory).
void forget_record(Db& db, const std::string& job_id);

}  // namespace fwlab
