#include "harness/ingest.h"

#include <filesystem>

#include "worker/events.h"

namespace fwlab {

namespace {

nlohmann::json number_or_null(const nlohmann::json& v) { return v.is_number() ? v : nlohmann::json(nullptr); }

}  // namespace

int64_t ingest_events(Db& db, const std::string& job_id, const std::string& job_dir) {
  const auto path = (std::filesystem::path(job_dir) / "events.jsonl").string();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return 0;
  int64_t added = 0;
  db.transaction([&] {
    auto q = db.prepare("SELECT events_offset FROM jobs WHERE id = ?");
    q.bind(1, job_id);
    uint64_t offset = q.step() ? static_cast<uint64_t>(q.integer(0)) : 0;
    if (offset > size) offset = 0;  // a record started over; (job_id, seq) keys keep this idempotent
    if (offset == size) return;
    auto read = read_events(path, offset);
    auto ins_event = db.prepare("INSERT OR IGNORE INTO events(job_id, seq, type, time, body) VALUES(?,?,?,?,?)");
    auto ins_metric = db.prepare("INSERT OR REPLACE INTO metrics(job_id, key, step, value, time) VALUES(?,?,?,?,?)");
    auto ins_eval = db.prepare(
        "INSERT OR REPLACE INTO evals(job_id, split, step, checkpoint, loss, ppl, bpc, accuracy, tokens, time) "
        "VALUES(?,?,?,?,?,?,?,?,?,?)");
    auto ins_div = db.prepare(
        "INSERT OR REPLACE INTO divergences(job_id, step, cause, value, last_finite_loss, lr, first_nonfinite_layer, "
        "state_layer) VALUES(?,?,?,?,?,?,?,?)");
    auto upd_start = db.prepare("UPDATE jobs SET host = ?, params = COALESCE(?, params) WHERE id = ?");
    for (const auto& e : read.events) {
      const std::string type = e.value("type", "");
      ins_event.bind(1, job_id).bind(2, e.value("seq", int64_t{-1})).bind(3, type).bind(4, number_or_null(e.value("time", nlohmann::json()))).bind(5, e.dump());
      ins_event.run();
      added += sqlite3_changes(db.handle());
      if (type == "metric") {
        ins_metric.bind(1, job_id).bind(2, e.value("key", "")).bind(3, e.value("step", int64_t{0}))
            .bind(4, number_or_null(e["value"])).bind(5, number_or_null(e["time"]));
        ins_metric.run();
      } else if (type == "eval") {
        ins_eval.bind(1, job_id).bind(2, e.value("split", "")).bind(3, e.value("step", int64_t{0})).bind(4, e.value("checkpoint", ""))
            .bind(5, number_or_null(e.value("loss", nlohmann::json()))).bind(6, number_or_null(e.value("ppl", nlohmann::json())))
            .bind(7, number_or_null(e.value("bpc", nlohmann::json()))).bind(8, number_or_null(e.value("accuracy", nlohmann::json())))
            .bind(9, e.value("tokens", nlohmann::json())).bind(10, number_or_null(e["time"]));
        ins_eval.run();
      } else if (type == "divergence") {
        ins_div.bind(1, job_id).bind(2, e.value("step", int64_t{0})).bind(3, e.value("cause", ""))
            .bind(4, e["value"].is_string() ? e["value"].get<std::string>() : e["value"].dump())
            .bind(5, number_or_null(e.value("last_finite_loss", nlohmann::json()))).bind(6, number_or_null(e.value("lr", nlohmann::json())))
            .bind(7, e.value("first_nonfinite_layer", nlohmann::json())).bind(8, e.value("state_layer", nlohmann::json()));
        ins_div.run();
      } else if (type == "start") {
        upd_start.bind(1, e.value("host", "")).bind(2, e.value("params", nlohmann::json())).bind(3, job_id);
        upd_start.run();
      }
    }
    auto upd = db.prepare("UPDATE jobs SET events_offset = ? WHERE id = ?");
    upd.bind(1, static_cast<int64_t>(read.end_offset)).bind(2, job_id);
    upd.run();
  });
  return added;
}

void forget_record(Db& db, const std::string& job_id) {
  db.transaction([&] {
    for (const char* table : {"events", "metrics", "evals", "divergences"}) {
      auto del = db.prepare(std::string("DELETE FROM ") + table + " WHERE job_id = ?");
      del.bind(1, job_id);
      del.run();
    }
    auto upd = db.prepare("UPDATE jobs SET events_offset = 0 WHERE id = ?");
    upd.bind(1, job_id);
    upd.run();
  });
}

}  // namespace fwlab
