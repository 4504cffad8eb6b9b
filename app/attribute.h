#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "costdb/costs.h"
#include "costdb/database.h"
#include "profiler/attribution.h"

namespace ergon::app {

/// What attributing one run found and stored.
struct AttributedRun {
  costdb::RunSummary run;
  profiler::Attribution attribution;
  std::vector<costdb::OpCostRow> rows;  ///< as written to op_costs
  int paging_rows = 0;  ///< the board's paging_costs rows, rebuilt from all its runs
  int link_rows = 0;    ///< the board's link_costs rows, rebuilt from all its runs
  uint64_t samples = 0;  ///< power samples attributed (the logger's, when one measured the board)
  /// The power logger's clock, when a logger on its own clock measured the board.
  std::optional<profiler::ClockFit> logger_clock;
  /// When the logger recorded op markers (run events "marker": its digital inputs, at its own
  /// ticks), the line from its clock to the board's that they gave, which placed its samples.
  std::optional<profiler::MarkerFit> markers;
};

/// Attributes a run's spans and samples (profiler/attribution.h), replaces its op_costs and
/// run_attributions rows, and rebuilds its board's paging_costs. Throws InputError for an
/// unknown run.
AttributedRun attribute_run(costdb::Database& db, int64_t run_id);

/// The same attribution, stored nowhere (`rows` as attribute_run would write them; the paging
/// and link counts zero): for a run whose times are read but must not become costs.
AttributedRun attribution_of(costdb::Database& db, int64_t run_id);

/// Every run that can be attributed: all but power loggers' (their samples go with the run of
/// the board they measured).
std::vector<int64_t> attributable_runs(costdb::Database& db);

}  // namespace ergon::app
