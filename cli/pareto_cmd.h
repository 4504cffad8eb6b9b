#pragma once

#include <iosfwd>
#include <string>

#include "app/pareto.h"

namespace ergon::cli {

using app::ParetoArgs;
using app::ParetoPoint;

/// Where `ergon pareto` writes its points besides the table it prints.
struct ParetoOutput {
  std::string csv;   ///< the points as CSV, when not empty
  std::string json;  ///< the points as JSON, when not empty
};

/// Runs the sweep (progress on stderr) and prints the fronts; returns the process exit code.
int run_pareto(const ParetoArgs& args, const ParetoOutput& output, std::ostream& out);

}  // namespace ergon::cli
