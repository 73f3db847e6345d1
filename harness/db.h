// The results database: one SQLite file in WAL mode with a busy timeout. The orchestrator is its only writer;
// the schema is documented in harness/README.md.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fwlab {

class DbError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The database could not be opened at the path given (a directory, not SQLite, no permission): the caller's
// argument is at fault, exit code 2.
class DbOpenError : public DbError {
 public:
  using DbError::DbError;
};

class Statement;

class Db {
 public:
  // Opens (creating the file and schema when `read_only` is false) the database at `path`; throws DbOpenError
  // naming the path when it is not a database or cannot be opened. A read-only database on read-only media
  // (where SQLite cannot create its WAL index) is opened as immutable.
  explicit Db(const std::string& path, bool read_only = false);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const std::string& sql);
  Statement prepare(const std::string& sql);
  // Every statement of `sql`, prepared; throws DbError naming the first one that would write (or attach a
  // database, or change a setting): nothing runs unless everything only reads.
  std::vector<Statement> prepare_read_only(const std::string& sql);
  // Runs `body` in a BEGIN IMMEDIATE transaction (committed on return, rolled back on exception).
  void transaction(const std::function<void()>& body);
  sqlite3* handle() { return db_; }
  const std::string& path() const { return path_; }

 private:
  void add_missing_columns();
  sqlite3* db_ = nullptr;
  std::string path_;
};

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql);
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& bind(int i, const std::string& v);
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, double v);
  Statement& bind(int i, const nlohmann::json& v);  // numbers, strings, null; objects/arrays as JSON text
  Statement& bind_null(int i);
  bool step();  // true while a row is available
  void run();   // step to completion, then reset for reuse
  void reset();
  int columns() const;
  std::string name(int c) const;
  bool is_null(int c) const;
  int64_t integer(int c) const;
  double real(int c) const;
  std::string text(int c) const;
  nlohmann::json value(int c) const;  // by the column's storage type

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Checks `path` before a command writes anything: not a directory, an SQLite file if it exists, and a parent
// directory that exists or can be made. Throws DbOpenError.
void check_db_path(const std::string& path, bool for_writing);

}  // namespace fwlab
