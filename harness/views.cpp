#include "harness/views.h"

#include <string>

namespace fwlab {

namespace {

// The best validation result is the one of lowest loss, as the worker chooses its best checkpoint; the test
// result is the best checkpoint's (the worker evaluates that one), else the latest.
const char* kRunsSelect = R"SQL(
WITH valid AS (
  SELECT job_id, step, loss, ppl, bpc, accuracy,
         ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY loss IS NULL, loss, step) AS best_rank,
         ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY step DESC) AS final_rank
  FROM evals WHERE split = 'valid'),
test AS (
  SELECT job_id, loss, ppl, bpc, accuracy,
         ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY checkpoint = 'best' DESC, step DESC) AS rank
  FROM evals WHERE split = 'test')
SELECT j.id AS job_id,
  (SELECT group_concat(DISTINCT c.experiment) FROM cells c WHERE c.job_id = j.id) AS experiments,
  (SELECT group_concat(DISTINCT c.profile) FROM cells c WHERE c.job_id = j.id) AS profiles,
  j.stage, j.coords, j.status, j.cause, j.reason, j.attempts, j.params AS n_params, j.state_elements,
  bv.step AS best_valid_step, bv.loss AS best_valid_loss, bv.ppl AS best_valid_ppl, bv.bpc AS best_valid_bpc,
  bv.accuracy AS best_valid_accuracy,
  fv.step AS final_valid_step, fv.loss AS final_valid_loss, fv.ppl AS final_valid_ppl, fv.bpc AS final_valid_bpc,
  fv.accuracy AS final_valid_accuracy,
  t.loss AS test_loss, t.ppl AS test_ppl, t.bpc AS test_bpc, t.accuracy AS test_accuracy,
  (SELECT m.value FROM metrics m WHERE m.job_id = j.id AND m.key = 'train_loss' ORDER BY m.step DESC LIMIT 1)
    AS final_train_loss,
  strftime('%Y-%m-%dT%H:%M:%SZ', j.created, 'unixepoch') AS created,
  strftime('%Y-%m-%dT%H:%M:%SZ', j.started, 'unixepoch') AS started,
  strftime('%Y-%m-%dT%H:%M:%SZ', j.finished, 'unixepoch') AS finished,
  j.finished - j.started AS seconds, j.host, j.dir, j.config,
  (SELECT json_extract(e.body, '$.resumed_from_step') FROM events e WHERE e.job_id = j.id AND e.type = 'start'
   ORDER BY e.seq DESC LIMIT 1) AS resumed_from_step
FROM jobs j
LEFT JOIN valid bv ON bv.job_id = j.id AND bv.best_rank = 1
LEFT JOIN valid fv ON fv.job_id = j.id AND fv.final_rank = 1
LEFT JOIN test t ON t.job_id = j.id AND t.rank = 1
)SQL";

// Leaves of the config under their dotted keys; an array is one value (its JSON), nothing inside it a row of
// its own. The key is built from path and key because json_tree's fullkey quotes names with '_' in them.
const char* kParamsSelect = R"SQL(
SELECT j.id AS job_id, ltrim(replace(substr(t.path, 2), '"', '') || '.' || t.key, '.') AS key, t.value AS value
FROM jobs j, json_tree(j.config) t
WHERE t.type <> 'object' AND instr(t.path, '[') = 0 AND substr(t.fullkey, -1) <> ']'
)SQL";

// The finished runs of each experiment, profile and stage ranked by their best validation loss (rank 1: the best;
// the loss orders perplexity and accuracy tasks alike): runs without a result (diverged, failed, not run) are not
// in it, so "the best cell" is never one whose metric is NULL.
const char* kBestSelect = R"SQL(
SELECT c.experiment, c.profile, r.stage, r.job_id, r.coords,
  ROW_NUMBER() OVER (PARTITION BY c.experiment, c.profile, r.stage ORDER BY r.best_valid_loss, r.job_id) AS rank,
  r.best_valid_loss, r.best_valid_ppl, r.best_valid_bpc, r.best_valid_accuracy, r.test_ppl, r.test_bpc,
  r.test_accuracy, r.seconds, r.dir
FROM runs r JOIN cells c ON c.job_id = r.job_id
WHERE r.status = 'finished' AND r.best_valid_loss IS NOT NULL
)SQL";

bool has_view(Db& db, const char* name) {
  auto q = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?");
  q.bind(1, std::string(name));
  return q.step();
}

}  // namespace

void create_views(Db& db, bool read_only) {
  if (read_only) {
    if (!has_view(db, "runs")) db.exec(std::string("CREATE TEMP VIEW runs AS ") + kRunsSelect);
    if (!has_view(db, "params")) db.exec(std::string("CREATE TEMP VIEW params AS ") + kParamsSelect);
    if (!has_view(db, "best")) db.exec(std::string("CREATE TEMP VIEW best AS ") + kBestSelect);
    return;
  }
  db.exec(std::string("DROP VIEW IF EXISTS best; DROP VIEW IF EXISTS runs; CREATE VIEW runs AS ") + kRunsSelect);
  db.exec(std::string("DROP VIEW IF EXISTS params; CREATE VIEW params AS ") + kParamsSelect);
  db.exec(std::string("CREATE VIEW best AS ") + kBestSelect);
}

}  // namespace fwlab
