#pragma once

// Private to costdb: the only header that includes sqlite3.h and libpq-fe.h. Never include it
// from a public header.
//
// A Database is either an SQLite file or a PostgreSQL database. The queries in costdb are
// written once, in the SQL both engines understand, with SQLite's parameter syntax (?1, ?);
// Statement runs them on either engine (on PostgreSQL, ?N becomes $N). Where the engines
// differ (JSON functions, bulk ingest, counting), the code asks Impl::postgres() and says so.

#include <libpq-fe.h>
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "costdb/database.h"

namespace ergon::costdb {

namespace detail {
class CopyBuffer;
}

struct Database::Impl {
  sqlite3* db = nullptr;  ///< SQLite: owned; closed (after committing the batch) by the destructor
  PGconn* pg = nullptr;   ///< PostgreSQL: owned; the batch is committed and the connection closed
  /// SQLite: the file. PostgreSQL: the locator as given, without its password (for messages).
  std::filesystem::path path;
  std::string conninfo;  ///< PostgreSQL: what libpq connects with (the locator, password and all)
  int version = 0;
  bool read_only = false;
  /// PostgreSQL: bulk rows (samples, spans) waiting for their COPY; flushed before any other
  /// statement runs on the connection and before a commit. Not owned.
  std::vector<detail::CopyBuffer*> copies;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  [[nodiscard]] bool postgres() const { return pg != nullptr; }

  /// Opens the write batch (BEGIN IMMEDIATE on SQLite, BEGIN on PostgreSQL) unless one is open
  /// or the database is read-only. A batch is gone after a failed commit or after the engine
  /// rolled it back on an error, so every write path calls this first.
  void ensure_batch();
  [[nodiscard]] bool in_batch() const;
  /// Makes the batch durable and opens the next one (Database::commit_batch).
  void commit_batch();
  /// Sends every buffered COPY (PostgreSQL); a no-op on SQLite.
  void flush_copies();
  /// "database <path>: <doing>: <reason>"
  [[nodiscard]] std::string message(std::string_view doing, std::string_view reason) const;
};

namespace detail {

/// Connects to a PostgreSQL database (is_postgres_locator) and, unless read_only, migrates it
/// to kSchemaVersion. any_version: only read the version (file_schema_version).
std::unique_ptr<Database::Impl> open_postgres(const std::string& locator, bool read_only,
                                              bool any_version);

/// PostgreSQL: the advisory lock (one bigint key) a recorder holds on its run while its session
/// lives; pg_locks shows it as classid kRunLockClass, objid run id, objsubid 1.
inline constexpr int64_t kRunLockClass = 0x4552474E;  // "ERGN"
[[nodiscard]] inline int64_t run_lock_key(int64_t run_id) { return (kRunLockClass << 32) | (run_id & 0xffffffff); }

std::optional<RunStatus> run_status_from_string(std::string_view text);
std::optional<RunPlan> run_plan_from_string(std::string_view text);

/// Throws DatabaseError for a failed SQLite call: the busy message for BUSY/LOCKED, otherwise
/// "database <path>: <doing>: <sqlite's message>".
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::filesystem::path& path,
                               std::string_view doing);

/// Runs SQL without results (several statements allowed) on either engine; throws
/// DatabaseError naming what it was doing.
void exec(Database::Impl& db, const std::string& sql, std::string_view doing);
/// SQLite only: the same on a bare connection (opening, migrating).
void exec(sqlite3* db, const char* sql, const std::filesystem::path& path, std::string_view doing);

/// The columns of power_samples that make a probes::PowerSample, in read_sample's order.
inline constexpr const char* kSampleColumns = "rail, t_ticks, bus_uv, current_ua, power_uw, flags";

/// Refuses a version this ergon cannot use: newer than it (any open), or, for a read-only
/// open, none or older (an upgrade writes). `where` is "database <path>".
void check_schema_version(const std::string& where, int version, bool read_only);

/// PostgreSQL only: runs SQL through the simple protocol (several statements allowed, no
/// parameters) after sending the buffered COPYs.
void postgres_exec(Database::Impl& db, const char* sql, std::string_view doing);
/// The locator without its password, for messages and listings.
std::string postgres_display_locator(std::string_view locator);

/// SQLite's parameters (?NNN, and ? numbered after the largest so far) as PostgreSQL's $NNN;
/// quoted text, quoted names and comments are left as they are.
std::string postgres_parameters(std::string_view sql);

/// PostgreSQL's text forms: a double that reads back exactly (Infinity, NaN spelt its way);
/// an integer column (a whole numeric, a float truncated, t/f as 1/0, as SQLite would read
/// them); a float8; a bytea in hex.
std::string postgres_double_text(double value);
int64_t parse_postgres_int64(std::string_view text);
double parse_postgres_double(std::string_view text);
std::vector<uint8_t> parse_postgres_bytea(std::string_view text);

/// An owned prepared statement on either engine. Binding text on SQLite uses SQLITE_STATIC: the
/// caller keeps the text alive until the statement is stepped and rebinds every parameter
/// before each step (bound values survive reset() on both engines).
///
/// On PostgreSQL the first step() sends the statement with its parameters and receives every
/// row; later steps walk them. Only one statement's rows are read at a time per connection.
class Statement {
 public:
  Statement() = default;
  Statement(Database::Impl& db, std::string_view sql);
  Statement(Statement&& other) noexcept { *this = std::move(other); }
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  [[nodiscard]] explicit operator bool() const { return db_ != nullptr; }
  /// SQLite's statement (nullptr on PostgreSQL): for the ingest path's own binding loop.
  [[nodiscard]] sqlite3_stmt* get() const { return stmt_; }

  void bind(int index, int64_t value);
  void bind(int index, uint64_t value) { bind(index, static_cast<int64_t>(value)); }
  void bind(int index, std::string_view text);
  void bind(int index, double value);
  void bind_blob(int index, const void* data, std::size_t size);
  void bind_null(int index);

  /// Steps once: true when a row is ready, false when done (and then resets). Throws (after
  /// resetting) on failure, naming what it was doing.
  bool step(std::string_view doing);
  /// Steps to completion and resets, for statements without results.
  void run(std::string_view doing) {
    while (step(doing)) {
    }
  }
  void reset();
  /// Rows the last completed INSERT, UPDATE or DELETE changed.
  [[nodiscard]] int64_t changes() const { return changes_; }

  [[nodiscard]] int64_t column_int64(int col) const;
  [[nodiscard]] uint64_t column_uint64(int col) const {
    return static_cast<uint64_t>(column_int64(col));
  }
  [[nodiscard]] bool column_is_null(int col) const;
  [[nodiscard]] double column_double(int col) const;
  [[nodiscard]] std::vector<uint8_t> column_blob(int col) const;
  [[nodiscard]] std::string_view column_text(int col) const;
  /// The row's first six columns as a sample (a query of kSampleColumns).
  [[nodiscard]] probes::PowerSample column_sample() const {
    probes::PowerSample s;
    s.rail = static_cast<uint8_t>(column_int64(0));
    s.t_ticks = column_uint64(1);
    s.bus_uv = static_cast<int32_t>(column_int64(2));
    s.current_ua = static_cast<int32_t>(column_int64(3));
    s.power_uw = static_cast<int32_t>(column_int64(4));
    s.flags = static_cast<uint8_t>(column_int64(5));
    return s;
  }

 private:
  struct PgParam {
    std::optional<std::string> value;  ///< nullopt: NULL
    unsigned type = 0;                 ///< 0: let the server infer it
    bool binary = false;
  };
  PgParam& pg_param(int index);
  void pg_execute(std::string_view doing);

  sqlite3_stmt* stmt_ = nullptr;
  Database::Impl* db_ = nullptr;
  int64_t changes_ = 0;
  // PostgreSQL
  std::string pg_sql_;
  std::vector<PgParam> pg_params_;
  PGresult* pg_result_ = nullptr;
  int pg_row_ = -1;  ///< the row step() made current
};

/// Rows for one table in PostgreSQL's binary COPY format, streamed: a COPY ... FROM STDIN opens
/// with the first full buffer and stays open while rows keep coming, so the server stores rows
/// while the client makes the next ones; it ends (and the server says whether the rows went
/// in) before any other statement, before a commit, and when another table's COPY opens.
/// Registers with the database while alive; the database's destructor flushes it.
class CopyBuffer {
 public:
  /// columns: "table (col, col, ...)"
  CopyBuffer(Database::Impl& db, std::string columns, std::string doing);
  CopyBuffer(const CopyBuffer&) = delete;
  CopyBuffer& operator=(const CopyBuffer&) = delete;
  ~CopyBuffer();

  void begin_row(int16_t fields);
  void add_int64(int64_t value);
  void add_int32(int32_t value);
  void add_int16(int16_t value);
  void add_text(std::string_view text);
  /// Ends a row; sends the buffer when it holds enough.
  void end_row();
  /// Sends what is buffered and ends the COPY: the rows are in the batch when it returns.
  void flush();
  void detach() { db_ = nullptr; }

 private:
  /// Sends the buffer, opening the COPY first (and ending any other table's).
  void send();

  Database::Impl* db_;
  std::string sql_;
  std::string doing_;
  std::string data_;
  std::size_t rows_ = 0;  ///< rows in data_
  bool open_ = false;     ///< a COPY of ours is in progress on the connection
};

}  // namespace detail
}  // namespace ergon::costdb
