#include "harness/ingest.h"

#include <simdjson.h>

#include <filesystem>
#include <fstream>

namespace fwlab {

namespace {

nlohmann::json number_or_null(const nlohmann::json& v) { return v.is_number() ? v : nlohmann::json(nullptr); }

// Fields of a record line read by type: a damaged or foreign line (a string where a number belongs) gives the
// default, never an exception that would stop ingestion.
int64_t int_field(const nlohmann::json& e, const char* key, int64_t otherwise) {
  const auto it = e.find(key);
  return it != e.end() && it->is_number_integer() ? it->get<int64_t>() : otherwise;
}
std::string text_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : "";
}
// A value stored as given when it is a string or number, as JSON text otherwise.
nlohmann::json scalar_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || it->is_null()) return nullptr;
  return it->is_string() || it->is_number() ? *it : nlohmann::json(it->dump());
}

// Complete lines from `offset` on; the torn tail (no newline yet) is left for the next call.
std::string read_complete_lines(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string data((std::istreambuf_iterator<char>(in)), {});
  const auto last_nl = data.rfind('\n');
  data.resize(last_nl == std::string::npos ? 0 : last_nl + 1);
  return data;
}

struct Inserts {
  Statement event, metric, eval, divergence, start;
  explicit Inserts(Db& db)
      : event(db.prepare("INSERT OR IGNORE INTO events(job_id, seq, type, time, body) VALUES(?,?,?,?,?)")),
        metric(db.prepare("INSERT OR REPLACE INTO metrics(job_id, key, step, value, time) VALUES(?,?,?,?,?)")),
        eval(db.prepare("INSERT OR REPLACE INTO evals(job_id, split, step, checkpoint, loss, ppl, bpc, accuracy, tokens, time) "
                        "VALUES(?,?,?,?,?,?,?,?,?,?)")),
        divergence(db.prepare("INSERT OR REPLACE INTO divergences(job_id, step, cause, value, last_finite_loss, lr, "
                              "first_nonfinite_layer, state_layer) VALUES(?,?,?,?,?,?,?,?)")),
        start(db.prepare("UPDATE jobs SET host = ?, params = COALESCE(?, params) WHERE id = ?")) {}
};

// Metric lines are most of a record: they take a fast path (simdjson, fields read in place). Returns false
// when the line is not a well-formed metric, to be handled by the general path.
bool ingest_metric(simdjson::ondemand::parser& parser, const char* line, size_t len, size_t capacity,
                   const std::string& job_id, Statement& ins) {
  auto doc = parser.iterate(line, len, capacity);
  if (doc.error()) return false;
  std::string_view type, key;
  int64_t step = 0;
  double value = 0, time = 0;
  bool have_value = false, finite = true;
  // Error codes throughout: simdjson throws when a failed result is iterated, and a damaged line must not.
  simdjson::ondemand::object object;
  if (doc.get_object().get(object)) return false;
  for (auto maybe_field : object) {
    simdjson::ondemand::field field;
    if (std::move(maybe_field).get(field)) return false;
    std::string_view name;
    if (field.unescaped_key().get(name)) return false;
    if (name == "type") {
      if (field.value().get_string().get(type)) return false;
      if (type != "metric") return false;
    } else if (name == "key") {
      if (field.value().get_string().get(key)) return false;
    } else if (name == "step") {
      if (field.value().get_int64().get(step)) return false;
    } else if (name == "time") {
      if (field.value().get_double().get(time)) return false;
    } else if (name == "value") {
      auto v = field.value();
      if (v.get_double().get(value) == simdjson::SUCCESS) have_value = true;
      else finite = false;  // "nan" / "inf" strings: stored as NULL
    }
  }
  if (type != "metric" || (!have_value && finite)) return false;
  ins.bind(1, job_id).bind(2, std::string(key)).bind(3, step);
  if (have_value) ins.bind(4, value);
  else ins.bind_null(4);
  ins.bind(5, time);
  ins.run();
  return true;
}

void ingest_other(const nlohmann::json& e, const std::string& line, const std::string& job_id, Inserts& s) {
  const std::string type = text_field(e, "type");
  s.event.bind(1, job_id).bind(2, int_field(e, "seq", -1)).bind(3, type).bind(4, number_or_null(scalar_field(e, "time"))).bind(5, line);
  s.event.run();
  auto number = [&](const char* k) { return number_or_null(scalar_field(e, k)); };
  if (type == "metric") {
    s.metric.bind(1, job_id).bind(2, text_field(e, "key")).bind(3, int_field(e, "step", 0)).bind(4, number("value")).bind(5, number("time"));
    s.metric.run();
  } else if (type == "eval") {
    s.eval.bind(1, job_id).bind(2, text_field(e, "split")).bind(3, int_field(e, "step", 0)).bind(4, text_field(e, "checkpoint"))
        .bind(5, number("loss")).bind(6, number("ppl")).bind(7, number("bpc")).bind(8, number("accuracy")).bind(9, number("tokens"))
        .bind(10, number("time"));
    s.eval.run();
  } else if (type == "divergence") {
    const auto value = scalar_field(e, "value");
    s.divergence.bind(1, job_id).bind(2, int_field(e, "step", 0)).bind(3, text_field(e, "cause"))
        .bind(4, value.is_string() ? value.get<std::string>() : value.dump()).bind(5, number("last_finite_loss"))
        .bind(6, number("lr")).bind(7, scalar_field(e, "first_nonfinite_layer")).bind(8, scalar_field(e, "state_layer"));
    s.divergence.run();
  } else if (type == "start") {
    s.start.bind(1, text_field(e, "host")).bind(2, number("params")).bind(3, job_id);
    s.start.run();
  }
}

}  // namespace

int64_t ingest_lines(Db& db, const std::string& job_id, std::string_view text) {
  const simdjson::padded_string data(text);
  simdjson::ondemand::parser parser;
  Inserts s(db);
  int64_t added = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t nl = std::min(std::string_view(data).find('\n', pos), data.size());
    const size_t len = nl - pos;
    const bool fast = ingest_metric(parser, data.data() + pos, len, data.size() + simdjson::SIMDJSON_PADDING - pos, job_id, s.metric);
    if (!fast) {
      std::string line(data.data() + pos, len);
      auto e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_object()) ingest_other(e, line, job_id, s);  // a damaged complete line is skipped
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
