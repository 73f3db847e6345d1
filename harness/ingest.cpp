#include "harness/ingest.h"

#include "contract/job/events.h"

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fwlab {

namespace {

// Complete lines from `offset` on; the torn tail (no newline yet) is left for the next call.
std::string read_complete_lines(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string data((std::istreambuf_iterator<char>(in)), {});
  const auto last_nl = data.rfind('\n');
  data.resize(last_nl == std::string::npos ? 0 : last_nl + 1);
  return data;
}

nlohmann::json finite_or_null(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json optional_json(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// One statement per table, prepared once per ingestion; each event type goes where analysis reads it.
struct Inserts {
  Statement event, metric, eval, divergence, start;
  const std::string& job_id;
  Inserts(Db& db, const std::string& id)
      : event(db.prepare("INSERT OR IGNORE INTO events(job_id, seq, type, time, body) VALUES(?,?,?,?,?)")),
        metric(db.prepare("INSERT OR REPLACE INTO metrics(job_id, key, step, value, time) VALUES(?,?,?,?,?)")),
        eval(db.prepare(
            "INSERT OR REPLACE INTO evals(job_id, split, step, checkpoint, loss, ppl, bpc, accuracy, tokens, time) "
            "VALUES(?,?,?,?,?,?,?,?,?,?)")),
        divergence(db.prepare("INSERT OR REPLACE INTO divergences(job_id, step, cause, value, last_finite_loss, lr, "
                              "first_nonfinite_layer, state_layer) VALUES(?,?,?,?,?,?,?,?)")),
        start(db.prepare("UPDATE jobs SET host = ?, params = COALESCE(?, params) WHERE id = ?")),
        job_id(id) {}

  void operator()(const MetricEvent& e, const RecordLine& r) {
    metric.bind(1, job_id)
        .bind(2, e.key)
        .bind(3, e.step)
        .bind(4, finite_or_null(e.value))
        .bind(5, finite_or_null(r.time));
    metric.run();
  }
  void operator()(const EvalEvent& e, const RecordLine& r) {
    eval.bind(1, job_id)
        .bind(2, e.split)
        .bind(3, e.step)
        .bind(4, e.checkpoint)
        .bind(5, finite_or_null(e.loss))
        .bind(6, finite_or_null(e.ppl))
        .bind(7, finite_or_null(e.bpc))
        .bind(8, finite_or_null(e.accuracy))
        .bind(9, optional_json(e.tokens))
        .bind(10, finite_or_null(r.time));
    eval.run();
  }
  void operator()(const DivergenceEvent& e, const RecordLine&) {
    divergence.bind(1, job_id)
        .bind(2, e.step)
        .bind(3, e.cause)
        .bind(4, e.value.is_string() ? e.value.get<std::string>() : e.value.dump())
        .bind(5, finite_or_null(e.last_finite_loss))
        .bind(6, finite_or_null(e.lr))
        .bind(7, e.first_nonfinite_layer)
        .bind(8, e.state_layer);
    divergence.run();
  }
  void operator()(const StartEvent& e, const RecordLine&) {
    start.bind(1, e.host).bind(2, optional_json(e.params)).bind(3, job_id);
    start.run();
  }
  void operator()(const EndEvent&, const RecordLine&) {}
  void operator()(const OtherEvent&, const RecordLine&) {}
};

}  // namespace

int64_t ingest_lines(Db& db, const std::string& job_id, std::string_view text) {
  EventReader reader;
  Inserts store(db, job_id);
  int64_t added = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    const auto line = text.substr(pos, nl - pos);
    if (const auto r = reader.read(line)) {  // a damaged complete line is skipped
      // Metric lines are most of a record and analysis reads the metrics table: only the other events are kept whole.
      if (!std::holds_alternative<MetricEvent>(r->event)) {
        store.event.bind(1, job_id)
            .bind(2, r->seq)
            .bind(3, r->type)
            .bind(4, finite_or_null(r->time))
            .bind(5, std::string(line));
        store.event.run();
      }
      std::visit([&](const auto& e) { store(e, *r); }, r->event);
    }
    ++added;
    pos = nl + 1;
  }
  return added;
}

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
    if (offset > size) offset = 0;  // a record started over; primary keys keep this idempotent
    if (offset == size) return;
    const auto data = read_complete_lines(path, offset);
    added = ingest_lines(db, job_id, data);
    auto upd = db.prepare("UPDATE jobs SET events_offset = ? WHERE id = ?");
    upd.bind(1, static_cast<int64_t>(offset + data.size())).bind(2, job_id);
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
