#pragma once

// `ergon sweep`: the same profile plan at each power mode of a board, recorded and attributed,
// and the energy-against-time curve it traces, per op kind and for the whole plan.

#include <iosfwd>

#include "app/sweep.h"

namespace ergon::cli {

/// Prints the sweep's table (or JSON); progress on stderr.
int run_sweep(const app::SweepRequest& args, bool json, std::ostream& out);

}  // namespace ergon::cli
