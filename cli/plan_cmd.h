#pragma once

#include <iosfwd>
#include <string>

#include "app/plan.h"

namespace ergon::cli {

// The use case lives in app/; the front end names its types as before.
using app::ModeSwitches;
using app::PlanArgs;
using app::PlanOutcome;

/// What `ergon plan` prints and writes besides the plan itself.
struct PlanOutput {
  bool json = false;
  std::string out;  ///< the encoded schedule (what a board receives), when not empty
};

/// Plans and prints a summary (or JSON); returns the process exit code.
int run_plan(const PlanArgs& args, const PlanOutput& output, std::ostream& out);

}  // namespace ergon::cli
