#include "costdb/database.h"

#include <string>
#include <system_error>

#include "common/error.h"
#include "costdb/database_impl.h"
#include "costdb/schema.h"

namespace ergon::costdb {
namespace {

/// How long a write waits for another connection's lock before giving up as busy.
constexpr int kBusyTimeoutMs = 2000;

// Set before the first table is written; ignored by SQLite for an existing file. Larger pages
// make bulk sample inserts cheaper (fewer page splits and WAL frames per sample).
constexpr const char* kNewFilePragmas = "PRAGMA page_size = 16384";

// WAL with synchronous=NORMAL stays consistent after a crash or power loss; a power loss may
// drop the last committed batches, never corrupt the file. cache_size is in KiB when negative.
constexpr const char* kWriterPragmas =
    "PRAGMA journal_mode = WAL;"
    "PRAGMA synchronous = NORMAL;"
    "PRAGMA foreign_keys = ON;"
    "PRAGMA cache_size = -65536;"
    "PRAGMA wal_autocheckpoint = 4096;"  // pages: checkpoint every 64 MiB of WAL
    "PRAGMA journal_size_limit = 67108864";  // and truncate the WAL back to 64 MiB after it

std::unique_ptr<Database::Impl> open_impl(const std::filesystem::path& path, bool read_only,
                                          bool any_version = false) {
  if (is_postgres_locator(path.string())) return detail::open_postgres(path.string(), read_only, any_version);
  auto impl = std::make_unique<Database::Impl>();
  impl->path = path;
  impl->read_only = read_only;
  const std::string where = "database " + path.string();

  if (read_only) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw DatabaseError(where + " does not exist");
  }
  const int access =
      read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  const int flags = access | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &impl->db, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string reason = impl->db != nullptr ? sqlite3_errmsg(impl->db) : sqlite3_errstr(rc);
    throw DatabaseError("cannot open " + where + ": " + reason);
  }
  sqlite3* db = impl->db;
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);

  // Read before anything else: a newer or foreign file must be refused without a single write
  // (switching the journal mode rewrites the header).
  impl->version = detail::read_schema_version(db, path);

  if (read_only) {
    if (any_version) return impl;
    detail::check_schema_version(where, impl->version, true);
    detail::exec(db, "PRAGMA foreign_keys = ON", path, "cannot configure the connection");
    return impl;
  }

  if (impl->version == 0) detail::exec(db, kNewFilePragmas, path, "cannot configure the file");
  detail::exec(db, kWriterPragmas, path, "cannot configure the connection");
  if (impl->version < kSchemaVersion) impl->version = detail::migrate(db, path);
  impl->ensure_batch();
  return impl;
}

}  // namespace

namespace detail {

void check_schema_version(const std::string& where, int version, bool read_only) {
  if (version > kSchemaVersion)
    throw DatabaseError(where + " has schema version " + std::to_string(version) +
                        ", newer than this ergon understands (" + std::to_string(kSchemaVersion) +
                        "): upgrade ergon");
  if (!read_only) return;
  if (version == 0) throw DatabaseError(where + " is not an ergon database (no schema)");
  if (version < kSchemaVersion)
    throw DatabaseError(where + " has schema version " + std::to_string(version) + ", older than this ergon (" +
                        std::to_string(kSchemaVersion) + "): upgrade it once with ergon upgrade --db " +
                        where.substr(std::string("database ").size()));
}

void throw_sqlite(sqlite3* db, int rc, const std::filesystem::path& path, std::string_view doing) {
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    throw DatabaseError("database " + path.string() + " is busy (another ergon is writing to it?)");
  }
  std::string reason = db != nullptr && sqlite3_errcode(db) == rc ? sqlite3_errmsg(db)
                                                                  : sqlite3_errstr(rc);
  std::string message = "database " + path.string() + ": ";
  message.append(doing);
  message += ": ";
  message += reason;
  throw DatabaseError(message);
}

void exec(sqlite3* db, const char* sql, const std::filesystem::path& path, std::string_view doing) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, path, doing);
}

void exec(Database::Impl& db, const std::string& sql, std::string_view doing) {
  if (!db.postgres()) {
    exec(db.db, sql.c_str(), db.path, doing);
    return;
  }
  postgres_exec(db, sql.c_str(), doing);
}

Statement::Statement(Database::Impl& db, std::string_view sql) : db_(&db) {
  if (db.postgres()) {
    pg_sql_ = postgres_parameters(sql);
    return;
  }
  const int rc = sqlite3_prepare_v3(db.db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db.db, rc, db.path, "cannot prepare a statement");
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    if (pg_result_ != nullptr) PQclear(pg_result_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    db_ = std::exchange(other.db_, nullptr);
    changes_ = other.changes_;
    pg_sql_ = std::move(other.pg_sql_);
    pg_params_ = std::move(other.pg_params_);
    pg_result_ = std::exchange(other.pg_result_, nullptr);
    pg_row_ = other.pg_row_;
  }
  return *this;
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
  if (pg_result_ != nullptr) PQclear(pg_result_);
}

void Statement::bind(int index, int64_t value) {
  if (stmt_ != nullptr) {
    sqlite3_bind_int64(stmt_, index, value);
    return;
  }
  PgParam& p = pg_param(index);
  p.value = std::to_string(value);
  p.type = 20;  // int8
  p.binary = false;
}

void Statement::bind(int index, std::string_view text) {
  if (stmt_ != nullptr) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    return;
  }
  PgParam& p = pg_param(index);
  p.value = std::string(text);
  p.type = 0;  // inferred: text where compared with text
  p.binary = false;
}

void Statement::bind(int index, double value) {
  if (stmt_ != nullptr) {
    sqlite3_bind_double(stmt_, index, value);
    return;
  }
  PgParam& p = pg_param(index);
  p.value = postgres_double_text(value);
  p.type = 701;  // float8
  p.binary = false;
}

void Statement::bind_blob(int index, const void* data, std::size_t size) {
  if (stmt_ != nullptr) {
    sqlite3_bind_blob(stmt_, index, data, static_cast<int>(size), SQLITE_STATIC);
    return;
  }
  PgParam& p = pg_param(index);
  p.value = std::string(static_cast<const char*>(data), size);
  p.type = 17;  // bytea
  p.binary = true;
}

void Statement::bind_null(int index) {
  if (stmt_ != nullptr) {
    sqlite3_bind_null(stmt_, index);
    return;
  }
  PgParam& p = pg_param(index);
  p.value.reset();
  p.type = 0;
  p.binary = false;
}

bool Statement::step(std::string_view doing) {
  if (stmt_ == nullptr) {
    if (pg_result_ == nullptr) pg_execute(doing);
    ++pg_row_;
    if (pg_row_ < PQntuples(pg_result_)) return true;
    reset();
    return false;
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    changes_ = sqlite3_changes(db_->db);
    sqlite3_reset(stmt_);
    return false;
  }
  // The message belongs to the failed step; read it before reset can touch it.
  const int code = sqlite3_extended_errcode(db_->db);
  std::string reason = sqlite3_errmsg(db_->db);
  sqlite3_reset(stmt_);
  const int primary = code & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw_sqlite(db_->db, code, db_->path, doing);
  throw DatabaseError(db_->message(doing, reason));
}

void Statement::reset() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    return;
  }
  if (pg_result_ != nullptr) PQclear(pg_result_);
  pg_result_ = nullptr;
  pg_row_ = -1;
}

int64_t Statement::column_int64(int col) const {
  if (stmt_ != nullptr) return sqlite3_column_int64(stmt_, col);
  return parse_postgres_int64(column_text(col));
}

bool Statement::column_is_null(int col) const {
  if (stmt_ != nullptr) return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
  return PQgetisnull(pg_result_, pg_row_, col) != 0;
}

double Statement::column_double(int col) const {
  if (stmt_ != nullptr) return sqlite3_column_double(stmt_, col);
  return parse_postgres_double(column_text(col));
}

std::vector<uint8_t> Statement::column_blob(int col) const {
  if (stmt_ != nullptr) {
    const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
    const auto size = static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col));
    return data == nullptr ? std::vector<uint8_t>{} : std::vector<uint8_t>(data, data + size);
  }
  if (column_is_null(col)) return {};
  return parse_postgres_bytea(column_text(col));
}

std::string_view Statement::column_text(int col) const {
  if (stmt_ != nullptr) {
    const auto* text = sqlite3_column_text(stmt_, col);
    if (text == nullptr) return {};
    return {reinterpret_cast<const char*>(text),
            static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
  }
  if (PQgetisnull(pg_result_, pg_row_, col) != 0) return {};
  return {PQgetvalue(pg_result_, pg_row_, col),
          static_cast<std::size_t>(PQgetlength(pg_result_, pg_row_, col))};
}

std::optional<RunStatus> run_status_from_string(std::string_view text) {
  for (RunStatus status : {RunStatus::kRecording, RunStatus::kCompleted, RunStatus::kStopped,
                           RunStatus::kDisconnected, RunStatus::kFailed}) {
    if (to_string(status) == text) return status;
  }
  return std::nullopt;
}

std::optional<RunPlan> run_plan_from_string(std::string_view text) {
  for (RunPlan plan : {RunPlan::kProfile, RunPlan::kSchedule, RunPlan::kExecute})
    if (to_string(plan) == text) return plan;
  return std::nullopt;
}

}  // namespace detail

Database::Impl::~Impl() {
  if (pg != nullptr) {
    try {
      if (!read_only && in_batch()) {
        flush_copies();
        PQclear(PQexec(pg, PQtransactionStatus(pg) == PQTRANS_INERROR ? "ROLLBACK" : "COMMIT"));
      }
    } catch (const std::exception&) {
      // A lost connection: what was not committed is gone, as after a crash.
    }
    for (detail::CopyBuffer* copy : copies) copy->detach();
    PQfinish(pg);
    return;
  }
  if (db == nullptr) return;
  if (!read_only && in_batch()) {
    if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  // close_v2: a RunWriter that outlives its Database still finalizes its statements safely.
  sqlite3_close_v2(db);
}

bool Database::Impl::in_batch() const {
  if (pg != nullptr) return PQtransactionStatus(pg) != PQTRANS_IDLE;
  return sqlite3_get_autocommit(db) == 0;
}

void Database::Impl::ensure_batch() {
  if (read_only || in_batch()) return;
  detail::exec(*this, postgres() ? "BEGIN" : "BEGIN IMMEDIATE", "cannot start a write batch");
}

void Database::Impl::commit_batch() {
  if (read_only) return;
  if (in_batch()) {
    flush_copies();
    detail::exec(*this, "COMMIT", "cannot commit a batch");
  }
  ensure_batch();
}

void Database::Impl::flush_copies() {
  for (detail::CopyBuffer* copy : copies) copy->flush();
}

std::string Database::Impl::message(std::string_view doing, std::string_view reason) const {
  std::string out = "database " + path.string() + ": ";
  out.append(doing);
  out += ": ";
  out.append(reason);
  return out;
}

bool database_exists(const std::filesystem::path& path) {
  if (is_postgres_locator(path.string())) return true;
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

Database Database::open(const std::filesystem::path& path) {
  return Database(open_impl(path, false));
}

Database Database::open_read_only(const std::filesystem::path& path) {
  return Database(open_impl(path, true));
}

int Database::file_schema_version(const std::filesystem::path& path) {
  return open_impl(path, true, true)->version;
}

int Database::schema_version() const { return impl_->version; }

const std::filesystem::path& Database::path() const { return impl_->path; }

void Database::commit_batch() { impl_->commit_batch(); }

bool Database::is_postgres() const { return impl_->postgres(); }

std::string Database::integrity_check() {
  if (impl_->postgres()) {
    throw InputError("database " + impl_->path.string() +
                     ": an integrity check is SQLite's; PostgreSQL checks its own pages "
                     "(pg_amcheck checks them on demand)");
  }
  detail::Statement check(*impl_, "PRAGMA integrity_check");
  std::string result;
  while (check.step("cannot check integrity")) {
    if (!result.empty()) result += '\n';
    result += check.column_text(0);
  }
  return result;
}

std::string_view to_string(RunStatus status) {
  switch (status) {
    case RunStatus::kRecording: return "recording";
    case RunStatus::kCompleted: return "completed";
    case RunStatus::kStopped: return "stopped";
    case RunStatus::kDisconnected: return "disconnected";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kInterrupted: return "interrupted";
  }
  return "failed";
}

std::string_view to_string(RunPlan plan) {
  switch (plan) {
    case RunPlan::kProfile: return "profile";
    case RunPlan::kSchedule: return "schedule";
    case RunPlan::kExecute: return "execute";
  }
  return "profile";
}

}  // namespace ergon::costdb
