#pragma once

// Private to costdb: the only header that includes sqlite3.h. Never include it from a public
// header.

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "costdb/database.h"

namespace ergon::costdb {

struct Database::Impl {
  sqlite3* db = nullptr;  ///< owned; closed (after committing the batch) by the destructor
  std::filesystem::path path;
  int version = 0;
  bool read_only = false;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  /// Opens the write batch (BEGIN IMMEDIATE) unless one is open or the database is read-only.
  /// A batch is gone after a failed commit or after SQLite rolled it back on an I/O error, so
  /// every write path calls this first.
  void ensure_batch();
  [[nodiscard]] bool in_batch() const { return sqlite3_get_autocommit(db) == 0; }
};

namespace detail {

std::optional<RunStatus> run_status_from_string(std::string_view text);
std::optional<RunPlan> run_plan_from_string(std::string_view text);

/// Throws DatabaseError for a failed SQLite call: the busy message for BUSY/LOCKED, otherwise
/// "database <path>: <doing>: <sqlite's message>".
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::filesystem::path& path,
                               std::string_view doing);

/// Runs SQL without results (several statements allowed); throws through throw_sqlite.
void exec(sqlite3* db, const char* sql, const std::filesystem::path& path, std::string_view doing);

/// An owned prepared statement. Binding text uses SQLITE_STATIC: the caller keeps the text alive
/// until the statement is stepped and rebinds every parameter before each step.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, std::string_view sql, const std::filesystem::path& path);
  Statement(Statement&& other) noexcept
      : stmt_(std::exchange(other.stmt_, nullptr)), db_(other.db_), path_(other.path_) {}
  Statement& operator=(Statement&& other) noexcept {
    if (this != &other) {
      sqlite3_finalize(stmt_);
      stmt_ = std::exchange(other.stmt_, nullptr);
      db_ = other.db_;
      path_ = other.path_;
    }
    return *this;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  [[nodiscard]] explicit operator bool() const { return stmt_ != nullptr; }
  [[nodiscard]] sqlite3_stmt* get() const { return stmt_; }

  void bind(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }
  void bind(int index, uint64_t value) {
    sqlite3_bind_int64(stmt_, index, static_cast<int64_t>(value));
  }
  void bind(int index, std::string_view text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
  }
  void bind(int index, double value) { sqlite3_bind_double(stmt_, index, value); }
  void bind_blob(int index, const void* data, std::size_t size) {
    sqlite3_bind_blob(stmt_, index, data, static_cast<int>(size), SQLITE_STATIC);
  }
  void bind_null(int index) { sqlite3_bind_null(stmt_, index); }

  /// Steps once: true when a row is ready, false when done (and then resets). Throws (after
  /// resetting) on failure, naming what it was doing.
  bool step(std::string_view doing);
  /// Steps to completion and resets, for statements without results.
  void run(std::string_view doing) {
    while (step(doing)) {
    }
  }
  void reset() { sqlite3_reset(stmt_); }

  [[nodiscard]] int64_t column_int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  [[nodiscard]] uint64_t column_uint64(int col) const {
    return static_cast<uint64_t>(sqlite3_column_int64(stmt_, col));
  }
  [[nodiscard]] bool column_is_null(int col) const {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
  }
  [[nodiscard]] double column_double(int col) const { return sqlite3_column_double(stmt_, col); }
  [[nodiscard]] std::vector<uint8_t> column_blob(int col) const {
    const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
    const auto size = static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col));
    return data == nullptr ? std::vector<uint8_t>{} : std::vector<uint8_t>(data, data + size);
  }
  [[nodiscard]] std::string_view column_text(int col) const {
    const auto* text = sqlite3_column_text(stmt_, col);
    if (text == nullptr) return {};
    return {reinterpret_cast<const char*>(text),
            static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
  const std::filesystem::path* path_ = nullptr;  ///< the owning Database's path, for messages
};

}  // namespace detail
}  // namespace ergon::costdb
