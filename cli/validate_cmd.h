#pragma once

#include <iosfwd>

#include "app/validate.h"

namespace ergon::cli {

/// `ergon validate`: prints predicted against measured (or JSON); returns the exit code (1
/// when executed gradients differ from store-all's).
int run_validate(const app::ValidateRequest& args, bool json, std::ostream& out);

}  // namespace ergon::cli
