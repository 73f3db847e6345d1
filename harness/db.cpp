#include "harness/db.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <string_view>
#include <filesystem>
#include <thread>

#include "harness/views.h"

namespace fwlab {

namespace {

const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS sweeps(
  id INTEGER PRIMARY KEY AUTOINCREMENT, experiment TEXT NOT NULL, file TEXT, profile TEXT, command TEXT,
  host TEXT, pid INTEGER, started REAL, finished REAL, status TEXT);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, experiment TEXT, stage TEXT, coords TEXT, config TEXT, depends_on TEXT,
  status TEXT NOT NULL, cause TEXT, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0, exit_code INTEGER,
  created REAL, started REAL, finished REAL, host TEXT, dir TEXT, owner_pid INTEGER, owner_host TEXT,
  params INTEGER, state_elements INTEGER, events_offset INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS cells(
  experiment TEXT NOT NULL, profile TEXT NOT NULL, stage TEXT NOT NULL, coords TEXT NOT NULL, job_id TEXT,
  applicable INTEGER NOT NULL, PRIMARY KEY(experiment, profile, stage, coords));
CREATE TABLE IF NOT EXISTS sweep_jobs(sweep_id INTEGER NOT NULL, job_id TEXT NOT NULL, PRIMARY KEY(sweep_id, job_id));
CREATE TABLE IF NOT EXISTS events(
  job_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT, time REAL, body TEXT, PRIMARY KEY(job_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS metrics(
  job_id TEXT NOT NULL, key TEXT NOT NULL, step INTEGER NOT NULL, value REAL, time REAL,
  PRIMARY KEY(job_id, key, step)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS evals(
  job_id TEXT NOT NULL, split TEXT NOT NULL, step INTEGER NOT NULL, checkpoint TEXT NOT NULL DEFAULT '',
  loss REAL, ppl REAL, bpc REAL, accuracy REAL, tokens INTEGER, time REAL,
  PRIMARY KEY(job_id, split, step, checkpoint)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS divergences(
  job_id TEXT PRIMARY KEY, step INTEGER, cause TEXT, value TEXT, last_finite_loss REAL, lr REAL,
  first_nonfinite_layer TEXT, state_layer TEXT);
CREATE TABLE IF NOT EXISTS derivations(
  job_id TEXT NOT NULL, experiment TEXT, stage TEXT NOT NULL, coords TEXT NOT NULL, key TEXT, value TEXT, record TEXT,
  created REAL, PRIMARY KEY(job_id, stage, coords));
CREATE TABLE IF NOT EXISTS waves(
  token TEXT PRIMARY KEY, sweep_id INTEGER, launcher TEXT NOT NULL, submitted REAL, batch_id TEXT, script TEXT);
CREATE INDEX IF NOT EXISTS jobs_by_experiment ON jobs(experiment, stage);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs(status);
CREATE INDEX IF NOT EXISTS cells_by_job ON cells(job_id);
)SQL";

}  // namespace

void check_db_path(const std::string& path, bool for_writing) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() == fs::file_type::directory)
    throw DbOpenError(fmt::format("{}: is a directory, not a results database", path));
  if (fs::exists(st)) {
    if (st.type() != fs::file_type::regular) throw DbOpenError(fmt::format("{}: not a regular file", path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DbOpenError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    char magic[16] = {};
    in.read(magic, sizeof magic);
    if (in.gcount() > 0 && std::memcmp(magic, "SQLite format 3", 16) != 0)
      throw DbOpenError(fmt::format("{}: not an SQLite database (a results database is made by `fwlab sweep`)", path));
    return;
  }
  if (!for_writing) throw DbOpenError(fmt::format("{}: no results database there (run `fwlab sweep` first)", path));
  const auto parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  fs::create_directories(parent, ec);
  if (ec || !fs::is_directory(parent, ec))
    throw DbOpenError(fmt::format("{}: cannot create its folder {}: {}", path, parent.string(),
                                  ec ? ec.message() : "not a directory"));
}

namespace {

// "file:" URI of a path (percent-escaping what a URI would read as syntax), for SQLITE_OPEN_URI.
std::string file_uri(const std::string& path) {
  std::string out = "file:";
  for (unsigned char c : std::filesystem::absolute(path).string())
    out += (std::isalnum(c) || std::string_view("/-_.~").find(static_cast<char>(c)) != std::string_view::npos)
               ? std::string(1, static_cast<char>(c))
               : fmt::format("%{:02X}", c);
  return out;
}

sqlite3* open_connection(const std::string& name, int flags, std::string& error) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(name.c_str(), &db, flags, nullptr) == SQLITE_OK) {
    // Opening is lazy: reading the schema tells a damaged, foreign or unreachable file apart now.
    sqlite3_busy_timeout(db, 30000);
    if (sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) == SQLITE_OK) return db;
  }
  error = db ? sqlite3_errmsg(db) : "out of memory";
  sqlite3_close(db);
  return nullptr;
}

}  // namespace

Db::Db(const std::string& path, bool read_only) : path_(path) {
  check_db_path(path, !read_only);
  std::string error;
  if (read_only) {
    db_ = open_connection(path, SQLITE_OPEN_READONLY, error);
    // On read-only media SQLite cannot make the WAL index (-shm) a reader needs; an immutable open reads the
    // file as it is (a finished sweep leaves no WAL behind).
    if (!db_) db_ = open_connection(file_uri(path) + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, error);
  } else {
    db_ = open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, error);
  }
  if (!db_) throw DbOpenError(fmt::format("{}: cannot open the results database: {}", path, error));
  if (read_only) create_views(*this, true);
  if (!read_only) {
    // Two sweeps may open a new database at once. Switching to WAL can fail with SQLITE_BUSY without waiting
    // on the busy handler, so retry it; the schema goes in one IMMEDIATE transaction, which does wait, so no
    // connection has to upgrade a read lock (SQLite answers that with an immediate SQLITE_BUSY too).
    try {
      for (int attempt = 0;; ++attempt) {
        if (sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr) == SQLITE_OK) break;
        const int code = sqlite3_errcode(db_) & 0xff;
        if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || attempt >= 600)
          exec("PRAGMA journal_mode=WAL");  // throws
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      exec("PRAGMA synchronous=NORMAL");
      transaction([&] {
        exec(kSchema);
        add_missing_columns();
        create_views(*this, false);
      });
    } catch (const DbError& e) {  // e.g. a read-only file or folder
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw DbOpenError(fmt::format("{}: cannot write the results database: {}", path, e.what()));
    }
  }
}

// Columns added since the first schema: a database made by an older fwlab gains them (NULL / default values).
void Db::add_missing_columns() {
  static const std::vector<std::pair<std::string, std::string>> kAdded = {
      {"jobs", "launcher TEXT"},      // local | slurm: who runs it while it is submitted or running
      {"jobs", "batch_id TEXT"},      // the batch system's id of the job (Slurm: ARRAY_TASK)
      {"jobs", "submit_token TEXT"},  // the wave it was submitted in (waves.token)
      {"jobs", "retries_used INTEGER NOT NULL DEFAULT 0"},  // retries after infrastructure failures, this sweep
      {"jobs", "timeout_s REAL"},
      {"sweeps", "executor TEXT"},  // the launcher's settings (JSON), for sync to submit later waves
      {"sweeps", "options TEXT"},   // retries, runs folder, threads (JSON)
  };
  for (const auto& added : kAdded) {
    const auto name = added.second.substr(0, added.second.find(' '));
    auto q = prepare("SELECT 1 FROM pragma_table_info('" + added.first + "') WHERE name = ?");
    q.bind(1, name);
    if (!q.step()) exec("ALTER TABLE " + added.first + " ADD COLUMN " + added.second);
  }
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

void Db::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw DbError(fmt::format("{}: {}", path_, msg));
  }
}

Statement Db::prepare(const std::string& sql) { return Statement(db_, sql); }

namespace {

// Lets a query read tables and call functions, nothing else: no ATTACH (which could create files), no PRAGMA
// that sets a value.
int read_only_authorizer(void*, int action, const char* arg1, const char* arg2, const char*, const char*) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    // A table-valued function (json_each, json_tree) declares its virtual table as it is first used, which
    // the authorizer sees as an update of sqlite_master; a statement that really writes is refused below
    // (sqlite3_stmt_readonly) and the connection is read-only anyway.
    case SQLITE_UPDATE:
      return arg1 && std::string_view(arg1) == "sqlite_master" ? SQLITE_OK : SQLITE_DENY;
    case SQLITE_PRAGMA: {
      static const std::set<std::string_view> kInformational = {"table_info",      "table_xinfo", "index_list",
                                                                "index_info",      "index_xinfo", "foreign_key_list",
                                                                "integrity_check", "quick_check"};
      return arg2 == nullptr || kInformational.count(arg1 ? arg1 : "") ? SQLITE_OK : SQLITE_DENY;
    }
    default:
      return SQLITE_DENY;
  }
}

}  // namespace

std::vector<Statement> Db::prepare_read_only(const std::string& sql) {
  std::vector<Statement> out;
  sqlite3_set_authorizer(db_, read_only_authorizer, nullptr);
  struct Unset {  // the authorizer only judges these statements, however preparing ends
    sqlite3* db;
    ~Unset() { sqlite3_set_authorizer(db, nullptr, nullptr); }
  } unset{db_};
  const char* at = sql.c_str();
  const char* end = at + sql.size();
  for (int index = 1; at < end; ++index) {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    const int rc = sqlite3_prepare_v2(db_, at, static_cast<int>(end - at), &stmt, &tail);
    std::string text(at, static_cast<size_t>((tail ? tail : end) - at));
    text.erase(0, std::min(text.size(), text.find_first_not_of(" \t\r\n")));
    if (rc == SQLITE_AUTH)
      throw DbError(fmt::format(
          "statement {} ({}) is not allowed: queries may only read (SELECT, WITH, informational PRAGMA)", index, text));
    if (rc != SQLITE_OK) throw DbError(fmt::format("statement {} ({}): {}", index, text, sqlite3_errmsg(db_)));
    at = tail ? tail : end;
    if (!stmt) continue;  // whitespace or a comment
    out.emplace_back(db_, stmt);
    // VACUUM INTO and the like pass the authorizer but write: SQLite itself knows which statements only read.
    if (!sqlite3_stmt_readonly(stmt))
      throw DbError(fmt::format("statement {} ({}) would write; queries may only read (SELECT, WITH, read-only PRAGMA)",
                                index, text));
  }
  return out;
}

void Db::transaction(const std::function<void()>& body) {
  exec("BEGIN IMMEDIATE");
  try {
    body();
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

Statement::Statement(sqlite3* db, const std::string& sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
    throw DbError(fmt::format("SQL error: {}", sqlite3_errmsg(db)));
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Statement& Statement::bind(int i, double v) {
  if (std::isfinite(v))
    sqlite3_bind_double(stmt_, i, v);
  else
    sqlite3_bind_null(stmt_, i);
  return *this;
}
Statement& Statement::bind(int i, const nlohmann::json& v) {
  if (v.is_null()) return bind_null(i);
  if (v.is_number_integer()) return bind(i, v.get<int64_t>());
  if (v.is_number()) return bind(i, v.get<double>());
  if (v.is_boolean()) return bind(i, static_cast<int64_t>(v.get<bool>()));
  if (v.is_string()) return bind(i, v.get<std::string>());
  return bind(i, v.dump());
}
Statement& Statement::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw DbError(fmt::format("SQL error: {}", sqlite3_errmsg(db_)));
}

void Statement::run() {
  while (step()) {
  }
  sqlite3_reset(stmt_);  // bindings stay: callers rebind every parameter (clearing them costs on hot paths)
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int Statement::columns() const { return sqlite3_column_count(stmt_); }
std::string Statement::name(int c) const { return sqlite3_column_name(stmt_, c); }
bool Statement::is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
int64_t Statement::integer(int c) const { return sqlite3_column_int64(stmt_, c); }
double Statement::real(int c) const { return sqlite3_column_double(stmt_, c); }
std::string Statement::text(int c) const {
  const auto* p = sqlite3_column_text(stmt_, c);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, c))) : "";
}
nlohmann::json Statement::value(int c) const {
  switch (sqlite3_column_type(stmt_, c)) {
    case SQLITE_INTEGER:
      return integer(c);
    case SQLITE_FLOAT:
      return real(c);
    case SQLITE_NULL:
      return nullptr;
    default:
      return text(c);
  }
}

}  // namespace fwlab
