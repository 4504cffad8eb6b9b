#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "costdb/costs.h"
#include "costdb/database.h"
#include "app/attribute.h"

namespace ergon::cli {

/// `ergon attribute`: every run given (all runs when none), a summary each (or JSON).
int run_attribute(const std::string& db_path, const std::vector<int64_t>& runs, bool json,
                  std::ostream& out);

struct CostsArgs {
  std::string db = "ergon.db";
  std::optional<std::string> board;  ///< board kind
  std::optional<int64_t> run;
  bool json = false;
  std::string csv;  ///< write here instead of printing a table ("-": stdout)
  bool fit = false;  ///< print the board's fitted cost model instead (needs --board)
  bool links = false;  ///< print the link costs (ergon record --link-test) instead
  std::optional<std::string> power_mode;  ///< only runs in this mode
};

/// `ergon costs`: the op_costs table with boards and op shapes.
int run_costs(const CostsArgs& args, std::ostream& out);

}  // namespace ergon::cli
