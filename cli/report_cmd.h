#pragma once

// `ergon report`: an energy statement for a recorded run or a stored plan, fit to paste into a
// paper: energy (J and kWh), time, average and peak power, the idle share, the facility's
// energy with its PUE, and emissions at a grid intensity, with what-ifs for other hours or
// months from a PUE profile.

#include <iosfwd>

#include "app/report.h"

namespace ergon::cli {

/// Prints the statement as Markdown (or JSON); returns the exit code.
int run_report(const app::ReportRequest& args, bool json, std::ostream& out);

}  // namespace ergon::cli
