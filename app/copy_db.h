#pragma once

// ergon copy: a cost database merged into another (a laptop's SQLite file into the lab's
// PostgreSQL database), safe to repeat.

#include <filesystem>
#include <functional>

#include "costdb/copy.h"

namespace ergon::app {

struct CopyRequest {
  std::filesystem::path from;  ///< opened read-only: never written
  std::filesystem::path to;    ///< created (an SQLite file) or migrated when needed
};

/// Copies what `to` lacks from `from` (costdb::copy_database). Throws InputError when both name
/// the same database, DatabaseError when either cannot be opened.
costdb::CopyCounts copy_databases(const CopyRequest& request,
                                  const std::function<void(const costdb::CopyProgress&)>& progress = {});

}  // namespace ergon::app
