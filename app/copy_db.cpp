#include "app/copy_db.h"

#include <system_error>

#include "common/error.h"
#include "costdb/database.h"

namespace ergon::app {

costdb::CopyCounts copy_databases(const CopyRequest& request,
                                  const std::function<void(const costdb::CopyProgress&)>& progress) {
  std::error_code ec;
  if (request.from == request.to ||
      (!costdb::is_postgres_locator(request.from.string()) && std::filesystem::equivalent(request.from, request.to, ec)))
    throw InputError("copy: --from and --to are the same database (" + request.from.string() + ")");
  auto from = costdb::Database::open_read_only(request.from);
  auto to = costdb::Database::open(request.to);
  return costdb::copy_database(from, to, progress);
}

}  // namespace ergon::app
