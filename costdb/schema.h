#pragma once

// Private to costdb: schema migrations.

#include <sqlite3.h>

#include <filesystem>

namespace ergon::costdb::detail {

/// PRAGMA user_version of an open connection; throws DatabaseError (naming the path) when the
/// file is not an SQLite database or cannot be read.
int read_schema_version(sqlite3* db, const std::filesystem::path& path);

/// Brings the file up to kSchemaVersion in one IMMEDIATE transaction; a failure rolls
/// everything back and throws DatabaseError. Refuses a file with foreign tables and no
/// version. Must be called outside a transaction. Returns the version the file has afterwards.
int migrate(sqlite3* db, const std::filesystem::path& path);

}  // namespace ergon::costdb::detail
