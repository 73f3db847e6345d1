// Incremental, idempotent ingestion of a job's record (events.jsonl, status.json) into the results database.
#pragma once

#include <string>
#include <string_view>

#include "harness/db.h"

namespace fwlab {

// Adds the complete event lines past the job's stored offset, in one transaction together with the new offset:
// ingesting twice, or again after a crash half-way, adds nothing twice. Returns the number of events added.
int64_t ingest_events(Db& db, const std::string& job_id, const std::string& job_dir);

// Ingests complete record lines (each ending in a newline; a last line without one is read too) inside the
// caller's transaction. Lines that are not JSON objects are skipped; fields of the wrong type read as absent.
int64_t ingest_lines(Db& db, const std::string& job_id, std::string_view text);

// Forgets a job's ingested record (before a retry starts it over in a fresh directory).
void forget_record(Db& db, const std::string& job_id);

}  // namespace fwlab
