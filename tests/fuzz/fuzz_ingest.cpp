// Ingestion of a worker's event record (events.jsonl) into the results database.
#include <memory>

#include "harness/db.h"
#include "harness/ingest.h"
#include "tests/fuzz/fuzz_target.h"

using namespace fwlab;

FWLAB_FUZZ_TARGET(ingest) {
  static const auto db = [] {
    auto d = std::make_unique<Db>(":memory:");
    d->exec("INSERT INTO jobs(id, status) VALUES('job', 'running')");
    return d;
  }();
  db->transaction([&] { ingest_lines(*db, "job", std::string_view(reinterpret_cast<const char*>(data), size)); });
  // Every metric row belongs to the job and has a key (possibly empty) and a step: the schema holds.
  auto q = db->prepare("SELECT COUNT(*) FROM metrics WHERE job_id != 'job' OR key IS NULL OR step IS NULL");
  q.step();
  if (q.integer(0) != 0) fuzz::violated("a metric row without job, key or step");
  forget_record(*db, "job");
  return 0;
}
