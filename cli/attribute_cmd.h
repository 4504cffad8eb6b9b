#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "costdb/costs.h"
#include "costdb/database.h"
#include "profiler/attribution.h"

namespace ergon::cli {

/// What attributing one run found and stored.
struct AttributedRun {
  costdb::RunSummary run;
  profiler::Attribution attribution;
  std::vector<costdb::OpCostRow> rows;  ///< as written to op_costs
  int paging_rows = 0;  ///< the board's paging_costs rows, rebuilt from all its runs
  uint64_t samples = 0;  ///< power samples attributed (the logger's, when one measured the board)
  /// The power logger's clock, when a logger on its own clock measured the board.
  std::optional<profiler::ClockFit> logger_clock;
};

/// Attributes a run's spans and samples (profiler/attribution.h), replaces its op_costs and
/// run_attributions rows, and rebuilds its board's paging_costs. Throws InputError for an
/// unknown run.
AttributedRun attribute_run(costdb::Database& db, int64_t run_id);

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
  std::optional<std::string> power_mode;  ///< only runs in this mode
};

/// `ergon costs`: the op_costs table with boards and op shapes.
int run_costs(const CostsArgs& args, std::ostream& out);

}  // namespace ergon::cli
