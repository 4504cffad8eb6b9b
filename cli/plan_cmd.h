#pragma once

#include <iosfwd>
#include <string>
#include <vector>
#include <cstdint>

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

/// The encoded schedule (what a board receives) at `path`, written whole or not at all.
void write_schedule(const std::vector<uint8_t>& encoded, const std::string& path);

/// Plans and prints a summary (or JSON); returns the process exit code.
int run_plan(const PlanArgs& args, const PlanOutput& output, std::ostream& out);

}  // namespace ergon::cli
