#pragma once

#include <atomic>
#include <iosfwd>
#include <vector>

#include "app/record.h"

namespace ergon::cli {

/// app::record_boards with a live status line on `out`: carriage-return updates on a
/// terminal, a line a second otherwise; then what the recording could not do (a logger whose
/// run was not linked).
std::vector<app::BoardOutcome> record_with_status(const app::RecordRequest& request, std::ostream& out,
                                                  const std::atomic<int>& interrupts);

/// Counts Ctrl-C / SIGTERM into the returned counter for the process's lifetime.
std::atomic<int>& install_interrupt_counter();

}  // namespace ergon::cli
