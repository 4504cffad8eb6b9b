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
    if (impl->version == 0) throw DatabaseError(where + " is not an ergon database (no schema)");
    if (impl->version < kSchemaVersion) {
      throw DatabaseError(where + " has schema version " + std::to_string(impl->version) +
                          ", older than this ergon (" + std::to_string(kSchemaVersion) +
                          "): upgrade it once with ergon upgrade --db " + path.string());
    }
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

Statement::Statement(sqlite3* db, std::string_view sql, const std::filesystem::path& path)
    : db_(db), path_(&path) {
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, path, "cannot prepare a statement");
}

bool Statement::step(std::string_view doing) {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    sqlite3_reset(stmt_);
    return false;
  }
  // The message belongs to the failed step; read it before reset can touch it.
  const int code = sqlite3_extended_errcode(db_);
  std::string reason = sqlite3_errmsg(db_);
  sqlite3_reset(stmt_);
  const int primary = code & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw_sqlite(db_, code, *path_, doing);
  std::string message = "database " + path_->string() + ": ";
  message.append(doing);
  message += ": ";
  message += reason;
  throw DatabaseError(message);
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
  if (db == nullptr) return;
  if (!read_only && in_batch()) {
    if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  // close_v2: a RunWriter that outlives its Database still finalizes its statements safely.
  sqlite3_close_v2(db);
}

void Database::Impl::ensure_batch() {
  if (read_only || in_batch()) return;
  detail::exec(db, "BEGIN IMMEDIATE", path, "cannot start a write batch");
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

void Database::commit_batch() {
  if (impl_->read_only) return;
  if (impl_->in_batch()) detail::exec(impl_->db, "COMMIT", impl_->path, "cannot commit a batch");
  impl_->ensure_batch();
}

std::string Database::integrity_check() {
  detail::Statement check(impl_->db, "PRAGMA integrity_check", impl_->path);
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
